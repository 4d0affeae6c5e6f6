"""The genome encoded once: every chromosome's one-hot, bit-packed and memory-mapped (no PyTorch).

Span input at real distances (25 kb to 2 Mb) cannot store each pair's span apart: the spans
of TargetFinder's pairs cover the genome 25 times over. The store holds each base once, in
the shards' packing (`sequence.onehot`: 4 bits a base, base 2k in the high nibble of byte k,
N and every other code all zeros), and windows and spans are cut from it when batches are
made, so its size is the genome's at that packing (half a byte a base) whatever the number
of pairs, cell lines and models.

Layout of a store folder:

- `chrom-NNNNN.u8`, one per sequence of the FASTA index, in its order: the sequence's
  bases `[0, length)` packed (ceil(length / 2) bytes; an odd length ends in a zero nibble).
  Files are named by position, not by chromosome name, so any name a FASTA allows works.
- `manifest.json`, written last and atomically: `format_version` (`GENOME_STORE_FORMAT`),
  `kind: "genome"` (`GENOME_STORE`), `packing`, `block_bases` and, per sequence, `name`, `length`, `file`,
  `bytes` and `blocks`: the SHA-256 of each run of `block_bases` bases (block_bases / 2
  bytes; the last one shorter), so a corrupt block is named by chromosome and bases, and
  the genome FASTA's name and index checksum it was built from.

`data.encode_genome.build_store` writes the whole folder under a temporary name beside it
and renames it into place at the end: a killed build leaves no store, only a `.partial`
folder that the next build removes, and builds are deterministic (a rebuild gives identical bytes). `GenomeStore`
maps the files read-only; memory stays flat however large the genome, since pages are read
only where windows are cut. It maps a file when a window is first cut from it and keeps at most
OPEN_MAPS mapped (the least recently read unmapped first): each map holds a file descriptor,
and a draft assembly of tens of thousands of scaffolds would pass the common limit of 1,024.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from pathlib import Path

import numpy as np

from epiformer.constants import GENOME_STORE, GENOME_STORE_FORMAT
from epiformer.io.files import atomic_write_text, sha256_file
from epiformer.sequence.onehot import count_unknown, pack_nibbles, unpack, unpack_nibbles

OPEN_MAPS = 256  # sequences a GenomeStore keeps mapped at once: a quarter of the common open-file limit


class GenomeStoreError(ValueError):
    """A genome store that is missing, corrupt, or does not match its manifest."""


def block_checksums(path: Path, block_bases: int) -> list[str]:
    """SHA-256 of each block_bases / 2 bytes of a packed file."""
    checksums = []
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(block_bases // 2), b""):
            checksums.append(hashlib.sha256(block).hexdigest())
    return checksums


def store_manifest_path(folder: str | Path) -> Path:
    return Path(folder) / "manifest.json"


def write_store_manifest(folder: str | Path, manifest: dict) -> None:
    """Write a store's manifest.json atomically, after its sequences (span shards record its SHA-256)."""
    atomic_write_text(store_manifest_path(folder), json.dumps(manifest, indent=1) + "\n")


def store_manifest_sha256(folder: str | Path) -> str:
    """SHA-256 of a store's manifest.json: span shards record it, to refuse a store rebuilt since."""
    return sha256_file(store_manifest_path(folder))


def read_store_manifest(folder: str | Path) -> dict:
    """A store's manifest.json; GenomeStoreError naming the fix when it is missing or of another format."""
    path = store_manifest_path(folder)
    if not path.is_file():
        raise GenomeStoreError(
            f"{path} is missing: build the genome store (rule genome_store, or data.encode_genome.build_store) again."
        )
    manifest = json.loads(path.read_text())
    if manifest.get("kind") != GENOME_STORE or manifest.get("format_version") != GENOME_STORE_FORMAT:
        raise GenomeStoreError(
            f"{path}: genome store format {manifest.get('format_version')} ({manifest.get('kind')}), this epiformer "
            f"reads {GENOME_STORE_FORMAT}: delete {Path(folder)} and build it again."
        )
    return manifest


class GenomeStore:
    """Windows and spans cut from an encoded genome (module docstring), as packed rows or one-hot.

    Opening checks every file's size against the manifest; `verify()` checks every block's
    SHA-256 and names the first corrupt one. Not shared across processes: each opens its own.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.manifest = read_store_manifest(self.folder)
        self.block_bases = int(self.manifest["block_bases"])
        self.sizes: dict[str, int] = {}
        self._files: dict[str, Path] = {}
        self._maps: OrderedDict[str, np.memmap] = OrderedDict()  # the most recently read last
        for entry in self.manifest["sequences"]:
            path = self.folder / entry["file"]
            size = path.stat().st_size if path.is_file() else None
            if size != entry["bytes"] or entry["bytes"] != (entry["length"] + 1) // 2:
                raise GenomeStoreError(
                    f"{path}: {'missing' if size is None else f'{size:,} bytes'}, the manifest says "
                    f"{entry['bytes']:,} for {entry['name']} ({entry['length']:,} bases): the store is damaged; "
                    f"delete {self.folder} and build it again."
                )
            self.sizes[entry["name"]] = int(entry["length"])
            self._files[entry["name"]] = path

    def close(self) -> None:
        self._maps.clear()  # numpy unmaps each file when its last view goes

    def _map(self, chrom: str) -> np.memmap:
        """`chrom`'s packed bytes, mapped read-only; the least recently read map goes beyond OPEN_MAPS."""
        if chrom in self._maps:
            self._maps.move_to_end(chrom)
            return self._maps[chrom]
        if len(self._maps) >= OPEN_MAPS:
            self._maps.popitem(last=False)
        mapped = np.memmap(self._files[chrom], dtype=np.uint8, mode="r")
        self._maps[chrom] = mapped
        return mapped

    def __enter__(self) -> GenomeStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def verify(self) -> None:
        """Check every block's SHA-256; GenomeStoreError names the chromosome and bases of the first corrupt block."""
        for entry in self.manifest["sequences"]:
            actual = block_checksums(self.folder / entry["file"], self.block_bases)
            for number, (found, expected) in enumerate(zip(actual, entry["blocks"])):
                if found != expected:
                    start = number * self.block_bases
                    end = min(start + self.block_bases, entry["length"])
                    raise GenomeStoreError(
                        f"{self.folder / entry['file']}: block {number} of {entry['name']} (bases {start:,}-{end:,}) "
                        f"does not match its SHA-256 in the manifest: the store is corrupt; delete {self.folder} "
                        "and build it again."
                    )

    def _check_chrom(self, chrom: str) -> None:
        if chrom not in self.sizes:
            raise GenomeStoreError(f"{chrom} is not in the genome store {self.folder} (built from another genome?).")

    def _nibbles(self, chrom: str, start: int, end: int) -> np.ndarray:
        """uint8 [end - start] packed nibbles (one a base) of [start, end), zero (N) past either chromosome end."""
        out = np.zeros(end - start, dtype=np.uint8)
        inner_start, inner_end = max(start, 0), min(end, self.sizes[chrom])
        if inner_start < inner_end:
            nibbles = unpack_nibbles(self._map(chrom)[inner_start // 2 : (inner_end + 1) // 2])
            first = inner_start % 2
            out[inner_start - start : inner_end - start] = nibbles[first : first + inner_end - inner_start]
        return out

    def packed(self, chrom: str, start: int, end: int) -> np.ndarray:
        """uint8 [ceil(L / 2)]: bases [start, end) of `chrom` packed as in shards (an odd L ends in a zero nibble)."""
        self._check_chrom(chrom)
        if start % 2 or start < 0 or end > self.sizes[chrom]:
            return pack_nibbles(self._nibbles(chrom, start, end))
        # An even start inside the chromosome: the stored bytes as they are (no unpacking), the
        # next base's nibble cleared after an odd length.
        out = np.array(self._map(chrom)[start // 2 : (end + 1) // 2]) if end > start else np.zeros(0, np.uint8)
        if (end - start) % 2:
            out[-1] &= 0xF0
        return out

    def unknown_bases(self, chrom: str, start: int, end: int) -> int:
        """Bases of [start, end) that are not A, C, G or T: N, and positions past either chromosome end."""
        self._check_chrom(chrom)
        inner_start, inner_end = max(start, 0), min(end, self.sizes[chrom])
        if inner_start >= inner_end:
            return max(end - start, 0)
        data = self._map(chrom)[inner_start // 2 : (inner_end + 1) // 2]
        unknown = count_unknown(data) + (inner_start - start) + (end - inner_end)
        if inner_start % 2:  # the first byte's high nibble is the base before `start`
            unknown -= int(data[0] >> 4 == 0)
        if inner_end % 2:  # the last byte's low nibble is the base at `end` (or the padding nibble)
            unknown -= int(data[-1] & 0x0F == 0)
        return unknown

    def packed_windows(self, chroms, starts, ends) -> np.ndarray:
        """uint8 [N, W / 2], windows of one even width W: pack_codes of Genome.fetch_many's bases (tested equal)."""
        starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        widths = set((ends - starts).tolist())
        if len(widths) > 1 or any(width % 2 for width in widths):
            raise ValueError(f"packed_windows needs windows of one even width, got {sorted(widths)[:5]}")
        width = widths.pop() if widths else 0
        out = np.empty((len(starts), width // 2), dtype=np.uint8)
        for row, (chrom, start, end) in enumerate(zip(chroms, starts.tolist(), ends.tolist())):
            out[row] = self.packed(chrom, start, end)
        return out

    def one_hot(self, chrom: str, start: int, end: int) -> np.ndarray:
        """uint8 [L, 4] one-hot of bases [start, end) of `chrom` (N and past the ends: all zeros)."""
        length = end - start
        return unpack(self.packed(chrom, start, end)[None], length + length % 2)[0, :length]
