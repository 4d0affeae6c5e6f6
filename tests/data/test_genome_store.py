"""The genome store: each base once, windows and spans cut from it equal the FASTA's (and bedtools getfasta)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from epiformer.data.encode_genome import build_store
from epiformer.data.genome import Genome
from epiformer.data.genome_store import GenomeStore, GenomeStoreError
from epiformer.sequence.onehot import one_hot, pack_codes
from tests.helpers import bedtools_getfasta, flip_a_byte, require_bedtools, under_open_file_limit

BLOCK = 64  # bases a checksummed block: small, so the test genome has several


@pytest.fixture
def odd_genome(tmp_path):
    """Chromosomes of odd and even length, soft-masked and IUPAC bases, odd line width; (path, sequences)."""
    rng = np.random.default_rng(3)
    sequences = {
        "chr1": "".join(rng.choice(list("ACGTacgtNRYn"), 501)),
        "chrUn_gl000220|x": "".join(rng.choice(list("ACGT"), 300)),  # any name a FASTA allows
        "chrM": "G",
    }
    path = tmp_path / "odd.fa"
    with open(path, "w") as handle:
        for name, seq in sequences.items():
            handle.write(f">{name}\n" + "".join(seq[i : i + 61] + "\n" for i in range(0, len(seq), 61)))
    return path, sequences


def built(genome_path, folder, **kwargs) -> GenomeStore:
    build_store(genome_path, folder, block_bases=BLOCK, **kwargs)
    return GenomeStore(folder)


def stored_bytes(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_the_store_holds_each_base_once_at_half_a_byte(odd_genome, tmp_path):
    path, sequences = odd_genome
    store = built(path, tmp_path / "store")
    packed = sum(p.stat().st_size for p in (tmp_path / "store").glob("chrom-*.u8"))
    assert packed == sum((len(seq) + 1) // 2 for seq in sequences.values())  # 251 + 150 + 1
    assert store.sizes == {name: len(seq) for name, seq in sequences.items()}
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    assert [len(entry["blocks"]) for entry in manifest["sequences"]] == [8, 5, 1]  # ceil(length / 64)


def test_windows_cut_from_the_store_equal_the_genomes_packed_windows_at_every_offset(odd_genome, tmp_path):
    path, _ = odd_genome
    store, genome = built(path, tmp_path / "store"), Genome(path)
    for chrom, length in genome.sizes.items():
        for width in (2, 8, 64):
            starts = np.arange(-width - 3, length + 3)  # odd and even starts, past both ends
            chroms = [chrom] * len(starts)
            expected = pack_codes(genome.fetch_many(chroms, starts, starts + width))
            np.testing.assert_array_equal(store.packed_windows(chroms, starts, starts + width), expected)


def test_cuts_of_every_length_and_offset_and_their_unknown_bases_equal_the_fasta(odd_genome, tmp_path):
    path, _ = odd_genome
    store, genome = built(path, tmp_path / "store"), Genome(path)
    rng = np.random.default_rng(0)
    for chrom, size in genome.sizes.items():
        for start, length in zip(rng.integers(-9, size + 3, 300), rng.integers(0, 70, 300)):
            start, end = int(start), int(start + length)
            codes = genome.fetch_many([chrom], [start], [end])  # N-padded past the ends
            padded = np.append(codes[0], np.uint8(ord("N"))) if length % 2 else codes[0]
            np.testing.assert_array_equal(store.packed(chrom, start, end), pack_codes(padded[None])[0])
            assert store.unknown_bases(chrom, start, end) == int((codes[0] == ord("N")).sum())


def test_spans_of_odd_length_are_the_one_hot_of_bedtools_getfasta(odd_genome, tmp_path):
    require_bedtools()
    path, _ = odd_genome
    store = built(path, tmp_path / "store")
    intervals = [("chr1", 0, 501), ("chr1", 7, 400), ("chr1", 63, 130), ("chrUn_gl000220|x", 1, 2), ("chrM", 0, 1)]
    expected = bedtools_getfasta(path, intervals, tmp_path)
    for (chrom, start, end), bases in zip(intervals, expected):
        codes = np.frombuffer(bases.encode(), dtype=np.uint8)[None]
        np.testing.assert_array_equal(store.one_hot(chrom, start, end), one_hot(codes)[0])
        assert len(store.packed(chrom, start, end)) == (end - start + 1) // 2


def test_a_killed_build_leaves_the_old_store_and_the_next_build_gives_identical_bytes(odd_genome, tmp_path):
    path, _ = odd_genome
    folder = tmp_path / "store"
    built(path, folder)
    first = stored_bytes(folder)

    def die_after_the_first_sequence(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_store(path, folder, block_bases=BLOCK, progress=die_after_the_first_sequence)
    assert stored_bytes(folder) == first  # the store in place is untouched
    assert (tmp_path / "store.partial").is_dir()  # what the killed build left
    built(path, folder)
    assert stored_bytes(folder) == first
    assert not (tmp_path / "store.partial").exists()


def test_a_corrupt_block_is_named_by_chromosome_and_bases(odd_genome, tmp_path):
    path, _ = odd_genome
    store = built(path, tmp_path / "store")
    store.verify()
    flip_a_byte(tmp_path / "store" / "chrom-00000.u8")  # byte 125: bases 250-251, block 3
    with pytest.raises(GenomeStoreError, match=r"block 3 of chr1 \(bases 192-256\) .* build it again"):
        GenomeStore(tmp_path / "store").verify()


def test_a_truncated_file_or_a_missing_manifest_is_refused_on_opening(odd_genome, tmp_path):
    path, _ = odd_genome
    built(path, tmp_path / "store")
    data = (tmp_path / "store" / "chrom-00001.u8").read_bytes()
    (tmp_path / "store" / "chrom-00001.u8").write_bytes(data[:-1])
    with pytest.raises(GenomeStoreError, match=r"chrom-00001.u8: 149 bytes, the manifest says 150 for chrUn"):
        GenomeStore(tmp_path / "store")
    (tmp_path / "store" / "manifest.json").unlink()
    with pytest.raises(GenomeStoreError, match="manifest.json is missing"):
        GenomeStore(tmp_path / "store")


def test_a_chromosome_the_store_lacks_is_named(odd_genome, tmp_path):
    path, _ = odd_genome
    store = built(path, tmp_path / "store")
    with pytest.raises(GenomeStoreError, match="chr2 is not in the genome store"):
        store.packed("chr2", 0, 10)


def draft_assembly(path, scaffolds: int, rng) -> dict[str, str]:
    """Three chromosomes and `scaffolds` short scaffolds, as a draft assembly's FASTA."""
    sequences = {f"chr{i}": "".join(rng.choice(list("ACGT"), 2_000)) for i in (1, 2, 3)}
    bases = rng.choice(list("ACGTN"), (scaffolds, 40))
    sequences |= {f"scaffold_{i}": "".join(row) for i, row in enumerate(bases)}
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in sequences.items()))
    return sequences


def test_a_store_of_more_sequences_than_the_open_file_limit_reads_every_one(tmp_path):
    """A draft assembly of 20,000 scaffolds under a soft limit of 1,024 open files: each map holds a file
    descriptor, so the store keeps only the recently read ones mapped; every sequence still reads as the FASTA."""
    sequences = draft_assembly(tmp_path / "draft.fa", 20_000, np.random.default_rng(5))
    build_store(tmp_path / "draft.fa", tmp_path / "store")
    read_all = f"""
import sys
from epiformer.data.genome_store import GenomeStore
store = GenomeStore({str(tmp_path / "store")!r})
for name, length in list(store.sizes.items()) * 2:
    sys.stdout.write(store.one_hot(name, 0, length).argmax(1).astype("uint8").tobytes().hex() + " ")
    sys.stdout.write(str(store.unknown_bases(name, 0, length)) + "\\n")
"""
    done = subprocess.run(
        [sys.executable, "-c", read_all],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=under_open_file_limit(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 * len(sequences)
    for line, (name, seq) in zip(lines, list(sequences.items()) * 2):
        codes, unknown = line.split()
        assert int(unknown) == seq.count("N"), name
        assert bytes.fromhex(codes) == bytes(max("ACGT".find(base), 0) for base in seq), name  # N: no base, argmax 0
