"""BGZF, the blocked gzip of `bgzip` and htslib: recognising it and writing it.

A BGZF file is a series of gzip members ("blocks"), each holding at most 65,280 bytes of
data, whose gzip header carries an extra field `BC` with the block's compressed size; a
28-byte empty block marks the end of the file. Because every block is a complete gzip
member, plain `gzip -d`/`zcat` read the file too, and a reader that knows where each block
starts (the `.gzi` index) can seek to any uncompressed offset.

`.gzi` layout (htslib `bgzf_index_dump`), little-endian: uint64 count, then for every block
after the first a pair of uint64 (compressed offset of its start, uncompressed offset of its
start).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_DATA_LIMIT = 0xFF00  # htslib's BGZF_BLOCK_SIZE: most uncompressed bytes in one block
BLOCK_SIZE_LIMIT = 0x10000  # BGZF_MAX_BLOCK_SIZE: the BC field stores (block size - 1) in 16 bits
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
_HEADER = struct.Struct("<4BI2BH2BHH")  # magic, CM, FLG, MTIME, XFL, OS, XLEN, 'B', 'C', SLEN, BSIZE
_FOOTER = struct.Struct("<II")  # CRC32, ISIZE


def gzip_kind(path: str | Path) -> str:
    """The compression of a file: `plain` (not gzip), `bgzf`, or `gzip` (gzip but not BGZF), from its first header."""
    with open(path, "rb") as handle:
        head = handle.read(12)
        if head[:2] != GZIP_MAGIC:
            return "plain"
        if len(head) < 12 or not head[3] & 0x04:  # FLG.FEXTRA: BGZF needs the extra field
            return "gzip"
        extra = handle.read(struct.unpack("<H", head[10:12])[0])
    while len(extra) >= 4:  # subfields: SI1, SI2, uint16 length, data
        length = struct.unpack("<H", extra[2:4])[0]
        if extra[:2] == b"BC" and length == 2:
            return "bgzf"
        extra = extra[4 + length :]
    return "gzip"


def compress_block(data: bytes, level: int = 6) -> bytes:
    """One complete BGZF block holding `data` (at most BLOCK_DATA_LIMIT bytes), raw deflate at `level`."""
    if len(data) > BLOCK_DATA_LIMIT:
        raise ValueError(f"a BGZF block holds at most {BLOCK_DATA_LIMIT} bytes, got {len(data)}")
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)  # wbits -15: raw deflate, we write the gzip framing
    deflated = compressor.compress(data) + compressor.flush()
    size = _HEADER.size + len(deflated) + _FOOTER.size
    if size > BLOCK_SIZE_LIMIT:  # cannot happen at BLOCK_DATA_LIMIT (stored deflate adds 5 bytes per 64 KiB)
        raise ValueError(f"BGZF block of {size} bytes exceeds {BLOCK_SIZE_LIMIT}")
    header = _HEADER.pack(0x1F, 0x8B, 8, 0x04, 0, 0, 0xFF, 6, ord("B"), ord("C"), 2, size - 1)
    return header + deflated + _FOOTER.pack(zlib.crc32(data), len(data))


class BgzfWriter:
    """Writes BGZF blocks to an open binary handle and records where each block starts.

    Block boundaries are the caller's: `write_block` writes one block, optionally from bytes
    compressed earlier (so identical blocks are compressed once); `write` splits longer data
    into full blocks. `close` writes the end-of-file block; `gzi` gives the `.gzi` index.
    """

    def __init__(self, handle: BinaryIO, level: int = 6):
        self.handle, self.level = handle, level
        self.compressed_offset = 0
        self.uncompressed_offset = 0
        self.block_starts: list[tuple[int, int]] = []  # (compressed, uncompressed) offset of each block
        self.blocks_compressed = 0  # blocks compressed here, not given as compressed bytes

    def write_block(self, data: bytes, compressed: bytes | None = None) -> None:
        """Write `data` as one block; `compressed`, if given, must be `compress_block(data)`."""
        if not data:
            return
        if compressed is None:
            compressed = compress_block(data, self.level)
            self.blocks_compressed += 1
        block = compressed
        self.block_starts.append((self.compressed_offset, self.uncompressed_offset))
        self.handle.write(block)
        self.compressed_offset += len(block)
        self.uncompressed_offset += len(data)

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), BLOCK_DATA_LIMIT):
            self.write_block(data[start : start + BLOCK_DATA_LIMIT])

    def close(self) -> None:
        self.handle.write(EOF_BLOCK)
        self.compressed_offset += len(EOF_BLOCK)

    def gzi(self) -> bytes:
        """The `.gzi` index of the blocks written so far (the first block, at 0/0, is implicit)."""
        starts = self.block_starts[1:]
        return struct.pack(f"<Q{2 * len(starts)}Q", len(starts), *(offset for pair in starts for offset in pair))
