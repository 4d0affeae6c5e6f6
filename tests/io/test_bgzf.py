"""epiformer.io.bgzf against htslib (pysam) and Python's gzip: the files it writes are BGZF they read."""

import gzip
import shutil

import numpy as np
import pysam
import pytest

from epiformer.io.bgzf import BLOCK_DATA_LIMIT, BLOCK_SIZE_LIMIT, BgzfWriter, compress_block, gzip_kind


def fasta_text(rng: np.random.Generator, length: int) -> bytes:
    seq = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, length)].tobytes()
    return b">chrA\n" + b"".join(seq[i : i + 60] + b"\n" for i in range(0, length, 60)) + b">chrB\nACGTN\n"


def test_written_file_reads_back_and_its_gzi_is_the_one_htslib_builds(tmp_path):
    data = fasta_text(np.random.default_rng(0), 300_000)
    path = tmp_path / "x.fa.gz"
    with open(path, "wb") as handle:
        writer = BgzfWriter(handle)
        writer.write(data[:1000])  # a short block, then full ones, then a reused compressed block
        writer.write(data[1000:-6])
        writer.write_block(data[-6:], compress_block(data[-6:]))
        writer.close()
    (tmp_path / "x.fa.gz.gzi").write_bytes(writer.gzi())
    assert gzip_kind(path) == "bgzf"
    assert gzip.decompress(path.read_bytes()) == data
    assert path.read_bytes().endswith(bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000"))
    assert writer.compressed_offset == path.stat().st_size
    assert writer.blocks_compressed == len(writer.block_starts) - 1

    copy = tmp_path / "copy.fa.gz"
    shutil.copy(path, copy)
    pysam.faidx(str(copy))
    assert (tmp_path / "copy.fa.gz.gzi").read_bytes() == writer.gzi()
    with pysam.FastaFile(str(path)) as fasta:  # our .gzi, htslib's .fai
        assert fasta.fetch("chrA", 123_456, 123_500) == data[6:].replace(b"\n", b"")[123_456:123_500].decode()
        assert fasta.fetch("chrB") == "ACGTN"


def test_incompressible_full_block_fits_and_oversize_data_is_refused():
    noise = np.random.default_rng(1).integers(0, 256, BLOCK_DATA_LIMIT, dtype=np.uint8).tobytes()
    block = compress_block(noise, level=9)
    assert len(block) <= BLOCK_SIZE_LIMIT and gzip.decompress(block) == noise
    with pytest.raises(ValueError, match="at most"):
        compress_block(noise + b"x")


def test_gzip_kind_tells_plain_gzip_and_bgzf_apart(tmp_path):
    plain = tmp_path / "a.fa"
    plain.write_bytes(b">a\nACGT\n")
    (tmp_path / "a.fa.gz").write_bytes(gzip.compress(plain.read_bytes()))
    pysam.tabix_compress(str(plain), str(tmp_path / "a.htslib.gz"))
    (tmp_path / "empty").write_bytes(b"")
    assert gzip_kind(plain) == "plain" and gzip_kind(tmp_path / "empty") == "plain"
    assert gzip_kind(tmp_path / "a.fa.gz") == "gzip"
    assert gzip_kind(tmp_path / "a.htslib.gz") == "bgzf"
