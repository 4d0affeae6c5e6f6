import subprocess

import pytest

from epiformer.genome import Genome
from tests.conftest import require_bedtools


def clean(seq: str) -> str:
    return "".join(b if b in "ACGT" else "N" for b in seq.upper())


def test_fetch_uppercases_and_turns_other_bases_into_n(small_fasta):
    path, sequences = small_fasta
    genome = Genome(path)
    assert genome.sizes == {"chrA": 500, "chrB": 300}
    assert genome.fetch("chrB", 0, 300).decode() == clean(sequences["chrB"])


def test_fetch_pads_past_both_ends_with_n(small_fasta):
    path, sequences = small_fasta
    genome = Genome(path)
    assert genome.fetch("chrA", -5, 10).decode() == "N" * 5 + sequences["chrA"][:10]
    assert genome.fetch("chrA", 495, 505).decode() == sequences["chrA"][495:] + "N" * 5
    assert genome.fetch("chrA", 600, 610).decode() == "N" * 10


def test_fetch_matches_bedtools_getfasta(small_fasta, tmp_path):
    require_bedtools()
    path, _ = small_fasta
    genome = Genome(path)
    intervals = [("chrA", 0, 17), ("chrA", 100, 260), ("chrB", 33, 299), ("chrB", 299, 300)]
    bed = tmp_path / "x.bed"
    bed.write_text("".join(f"{c}\t{s}\t{e}\n" for c, s, e in intervals))
    out = subprocess.run(["bedtools", "getfasta", "-fi", str(path), "-bed", str(bed), "-tab"],
                         check=True, capture_output=True, text=True).stdout.splitlines()  # fmt: skip
    for (chrom, start, end), line in zip(intervals, out):
        assert genome.fetch(chrom, start, end).decode() == clean(line.split("\t")[1])


def test_missing_genome_says_where_to_fix_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="genomes:"):
        Genome(tmp_path / "absent.fa")
