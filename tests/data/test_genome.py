import gzip

import numpy as np
import pandas as pd
import pysam
import pytest

from epiformer.data.genome import Genome, GenomeError, fai_path, gzi_path, index_fasta
from epiformer.data.pairs import read_pairs
from epiformer.data.windows import WindowSpec, make_windows
from tests.helpers import bedtools_getfasta, clean_bases, require_bedtools


def test_fetch_uppercases_and_turns_other_bases_into_n(small_fasta):
    path, sequences = small_fasta
    genome = Genome(path)
    assert genome.sizes == {"chrA": 500, "chrB": 300}
    assert genome.fetch("chrB", 0, 300).decode() == clean_bases(sequences["chrB"])


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
    expected = bedtools_getfasta(path, intervals, tmp_path)
    assert [genome.fetch(chrom, start, end).decode() for chrom, start, end in intervals] == expected


def test_missing_genome_says_where_to_fix_it(tmp_path):
    with pytest.raises(GenomeError, match=r"absent.fa. Give the FASTA .* `genomes:` in the config, or --genome"):
        Genome(tmp_path / "absent.fa")


def test_index_is_made_once_and_reused(small_fasta):
    path, _ = small_fasta
    Genome(path).close()
    stamp = fai_path(path).stat().st_mtime_ns
    Genome(path).close()
    assert fai_path(path).stat().st_mtime_ns == stamp


def bgzip(path, out):
    """Compress with htslib's own BGZF writer (what `bgzip` does), independent of epiformer.io.bgzf."""
    pysam.tabix_compress(str(path), str(out))
    return out


def test_bgzip_genome_is_indexed_with_fai_and_gzi_and_reads_like_plain_and_bedtools(small_fasta, tmp_path):
    require_bedtools()
    path, sequences = small_fasta
    compressed = bgzip(path, tmp_path / "small.fa.gz")
    assert index_fasta(compressed) == fai_path(compressed)
    assert gzi_path(compressed).stat().st_size > 0
    assert fai_path(compressed).read_text() == index_fasta(path).read_text()  # .fai offsets are uncompressed
    intervals = [("chrA", 0, 17), ("chrA", 100, 260), ("chrA", 440, 500), ("chrB", 33, 299), ("chrB", 299, 300)]
    expected = bedtools_getfasta(path, intervals, tmp_path)
    with Genome(compressed) as packed, Genome(path) as plain:
        assert packed.sizes == plain.sizes == {"chrA": 500, "chrB": 300}
        for (chrom, start, end), want in zip(intervals, expected):
            assert packed.fetch(chrom, start, end).decode() == plain.fetch(chrom, start, end).decode() == want
        assert packed.fetch("chrB", 0, 300).decode() == clean_bases(sequences["chrB"])
        assert packed.fetch("chrA", -5, 10).decode() == "N" * 5 + sequences["chrA"][:10]
        assert packed.fetch("chrA", 495, 505).decode() == sequences["chrA"][495:] + "N" * 5


def test_genome_builds_a_missing_gzi_for_bgzip(small_fasta, tmp_path):
    path, sequences = small_fasta
    compressed = bgzip(path, tmp_path / "small.fa.gz")
    index_fasta(compressed)
    gzi_path(compressed).unlink()
    with Genome(compressed) as genome:
        assert genome.fetch("chrA", 0, 500).decode() == sequences["chrA"]
    assert gzi_path(compressed).exists()


def write_fasta(path, sequences: dict[str, str], width: int = 60):
    with open(path, "w") as handle:
        for name, seq in sequences.items():
            handle.write(f">{name}\n" + "".join(seq[i : i + width] + "\n" for i in range(0, len(seq), width)))
    return path


def test_windows_from_a_bgzip_genome_equal_those_of_the_plain_genome(tmp_path):
    require_bedtools()
    rng = np.random.default_rng(3)

    def bases(n: int) -> str:
        return "".join(rng.choice(list("ACGTacgt"), n))

    # chrB has a 200-bp gap of N, so one promoter window is mostly N and its pair is dropped.
    path = write_fasta(tmp_path / "gap.fa", {"chrA": bases(700), "chrB": bases(250) + "N" * 200 + bases(150)}, width=50)
    compressed = bgzip(path, tmp_path / "gap.fa.gz")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(
        "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label\n"
        "chrA,10,30,chrA,200,240,1\nchrA,650,690,chrA,300,320,0\nchrB,5,25,chrB,320,340,1\nchrB,100,120,chrB,560,600,0\n"
    )
    results = {}
    for name, genome_path in (("plain", path), ("bgzip", compressed)):
        with Genome(genome_path) as genome:
            windows, report = make_windows(read_pairs(pairs), genome.sizes, WindowSpec(64, 48), genome)
            codes = {
                e: genome.fetch_many(windows[f"{e}_chrom"].tolist(), windows[f"{e}_start"], windows[f"{e}_end"])
                for e in ("enhancer", "promoter")
            }
            results[name] = windows, dict(report.dropped), codes
    (windows, dropped, codes), (packed_windows, packed_dropped, packed_codes) = results["plain"], results["bgzip"]
    pd.testing.assert_frame_equal(windows, packed_windows)
    assert dropped == packed_dropped and dropped["promoter_window_mostly_n"] == 1 and len(windows) == 3
    assert windows["enhancer_end"].max() == 700  # the chromosome-end window was shifted inside, as in plain
    for element in ("enhancer", "promoter"):
        np.testing.assert_array_equal(codes[element], packed_codes[element])
        intervals = list(zip(windows[f"{element}_chrom"], windows[f"{element}_start"], windows[f"{element}_end"]))
        assert [row.tobytes().decode() for row in packed_codes[element]] == bedtools_getfasta(path, intervals, tmp_path)


def test_plain_gzip_genome_is_refused_with_how_to_recompress_it(small_fasta, tmp_path):
    path, _ = small_fasta
    gzipped = tmp_path / "small.fa.gz"
    gzipped.write_bytes(gzip.compress(path.read_bytes()))
    for attempt in (index_fasta, Genome):
        with pytest.raises(GenomeError, match=r"plain gzip.*bgzip.*tabix.*gunzip") as error:
            attempt(gzipped)
        assert str(gzipped) in str(error.value)
    assert not fai_path(gzipped).exists() and not gzi_path(gzipped).exists()


def test_malformed_bgzip_genome_error_names_the_line_and_leaves_no_index(tmp_path):
    plain = tmp_path / "ragged.fa"
    plain.write_text(">chrA\nACGTACGT\nACG\nACGTACGT\n")
    compressed = bgzip(plain, tmp_path / "ragged.fa.gz")
    with pytest.raises(GenomeError, match=r"ragged\.fa\.gz.*line 4.*equal length"):
        index_fasta(compressed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ragged.fa", "ragged.fa.gz"]


def test_a_file_that_is_not_fasta_is_named_in_one_clean_sentence(tmp_path):
    # pyfaidx's own message ends in a full stop; ours must not double it.
    plain = tmp_path / "notes.fa"
    plain.write_text("chrA ACGT\nthis is not a FASTA file\n")
    with pytest.raises(GenomeError, match=r"notes\.fa.*plain or bgzip-compressed FASTA") as error:
        index_fasta(plain)
    assert ".." not in str(error.value)


def test_a_plain_genome_index_appears_whole_or_not_at_all(tmp_path):
    """Two runs in different folders may share one genome: the index is written under another name and renamed,
    so a reader sees the old index or the new one, never a part; a failed indexing leaves the old one alone."""
    plain = tmp_path / "genome.fa"
    plain.write_text(">chrA\nACGTACGT\nACGT\n>chrB\nGGCC\n")
    stale = fai_path(plain)
    stale.write_text("chrA\t4\t6\t4\t5\n")
    kept = stale.open()  # a reader holding the stale index keeps reading it whole
    index_fasta(plain)
    assert kept.read() == "chrA\t4\t6\t4\t5\n"
    assert fai_path(plain).read_text() == "chrA\t12\t6\t8\t9\nchrB\t4\t26\t4\t5\n"
    plain.write_text(">chrA\nACGTACGT\nACG\nACGTACGT\n")  # now ragged: indexing fails
    with pytest.raises(GenomeError, match="equal length"):
        index_fasta(plain)
    assert fai_path(plain).read_text() == "chrA\t12\t6\t8\t9\nchrB\t4\t26\t4\t5\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["genome.fa", "genome.fa.fai"]
