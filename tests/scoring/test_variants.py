"""`epiformer variants`: every scored variant checked against `epiformer predict` on a genome carrying it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pysam
import pytest

from epiformer.data.genome import Genome
from epiformer.data.pairs import read_pairs
from epiformer.data.windows import place_pair_windows, window_spec_for
from epiformer.inference.trained_model import read_model_description
from epiformer.io.vcf import VcfError
from epiformer.scoring.new_pairs import packed_pairs
from epiformer.scoring.predict import predict_pairs
from epiformer.scoring.variants import Alleles, IntervalUnion, overlapping_alleles, score_variants, with_alleles
from tests.helpers import read_fasta, write_fasta

CLI = [sys.executable, "-m", "epiformer.cli"]
VCF_HEADER = [
    "##fileformat=VCFv4.2",
    "##source=tests/scoring/test_variants.py",
    '##INFO=<ID=DP,Number=1,Type=Integer,Description="depth">',
]
COLUMNS_LINE = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"
N_PAIRS = 24  # pairs of demo_a scored (and a trans pair added after them)


def vcf_text(sequences: dict[str, str], records: list[str]) -> str:
    contigs = [f"##contig=<ID={name},length={len(seq)}>" for name, seq in sequences.items()]
    return "\n".join([*VCF_HEADER, *contigs, COLUMNS_LINE, *records]) + "\n"


def header_lines(sequences) -> int:
    return len(VCF_HEADER) + len(sequences) + 1


@pytest.fixture(scope="module")
def setup(tiny_demo, trained_cells, tmp_path_factory):
    """The tiny demo's genome, a pairs file (N_PAIRS demo_a pairs and a trans pair), the trained model, windows."""
    folder = tmp_path_factory.mktemp("variants")
    pairs = pd.read_csv(tiny_demo["demo_a"]).head(N_PAIRS)
    sequences = read_fasta(tiny_demo["genome"])
    windows_of = {}
    with Genome(tiny_demo["genome"]) as genome:
        model_dir = trained_cells["demo_a"] / "linear"
        description = read_model_description(model_dir)
        windows, _ = place_pair_windows(
            read_pairs(tiny_demo["demo_a"]).head(N_PAIRS), genome, window_spec_for(description)
        )
        taken = IntervalUnion(
            *(
                np.concatenate([windows[f"{e}_{f}"] for e in ("enhancer", "promoter")])
                for f in ("chrom", "start", "end")
            )
        )
        # A trans pair (left unscored: the model was trained without trans pairs) in a region no other window covers.
        chrom = "chr1"
        free = next(
            s
            for s in range(20_000, 150_000, 500)
            if not taken.overlaps(chrom, s - 200, s + 200)
            and set(sequences[chrom][s - 100 : s + 100].upper()) <= set("ACGT")
        )
        trans = {**pairs.iloc[0].to_dict(), "enhancer_chrom": chrom, "enhancer_start": free - 20}
        trans.update(enhancer_end=free + 20, promoter_chrom="chr2")
        pairs = pd.concat([pairs, pd.DataFrame([trans])], ignore_index=True)
        windows_of["free"] = (chrom, free)
    pairs_path = folder / "pairs.csv"
    pairs.to_csv(pairs_path, index=False)
    genome_path = write_fasta(folder / "genome.fa", sequences)
    return {
        "folder": folder,
        "genome": genome_path,
        "sequences": sequences,
        "pairs": pairs_path,
        "model": model_dir,
        "windows": windows,
        "taken": taken,
        "free": windows_of["free"],
    }


def base(setup, chrom: str, start: int, length: int = 1) -> str:
    return setup["sequences"][chrom][start : start + length].upper()


def other(letter: str, shift: int = 1) -> str:
    return "ACGT"[("ACGT".index(letter) + shift) % 4]


def acceptance_records(setup) -> tuple[list[str], dict]:
    """VCF records: SNVs in enhancer and promoter windows, a multi-allelic one, an MNV across a window's first
    base, SNVs at window edges, and alleles that cannot be scored; returns them and the expected unscored rows."""
    windows = setup["windows"]
    first, second, third = windows.iloc[0], windows.iloc[5], windows.iloc[11]
    picks = [
        (first["enhancer_chrom"], int(first["enhancer_start"]) + 7),
        (second["promoter_chrom"], int(second["promoter_start"]) + 20),
        (third["enhancer_chrom"], int(third["enhancer_end"]) - 1),  # last base of a window
        (third["promoter_chrom"], int(third["promoter_start"])),  # first base of a window
    ]
    records = []
    for number, (chrom, start) in enumerate(picks):
        ref = base(setup, chrom, start)
        records.append(f"{chrom}\t{start + 1}\tsnv{number}\t{ref}\t{other(ref)}\t50\tPASS\tDP=10")
    chrom, start = first["promoter_chrom"], int(first["promoter_start"]) + 30
    ref = base(setup, chrom, start)
    records.append(f"{chrom}\t{start + 1}\tmulti\t{ref}\t{other(ref)},{other(ref, 2)}\t.\t.\t.")
    chrom, start = second["enhancer_chrom"], int(second["enhancer_start"]) - 1  # one base before, one inside
    ref = base(setup, chrom, start, 2)
    records.append(f"{chrom}\t{start + 1}\tmnv\t{ref.lower()}\t{other(ref[0])}{other(ref[1])}\t.\t.\t.")
    chrom, free = setup["free"]
    far = free + 5_000
    while setup["taken"].overlaps(chrom, far - 1, far + 2) or base(setup, chrom, far) not in "ACGT":
        far += 37
    inside = int(first["enhancer_start"]) + 30
    unscorable = [
        (chrom, far, "A", "outside_every_window"),
        (chrom, free, "C", "only_in_unscored_pairs"),
        (first["enhancer_chrom"], inside, "AT", "indel"),
        (first["enhancer_chrom"], inside, "<DEL>", "alt_not_acgt"),
        (first["enhancer_chrom"], inside, ".", "no_alt"),
    ]
    expected = []
    for chrom, start, alt, reason in unscorable:
        ref = base(setup, chrom, start)
        alt = ref + "T" if alt == "AT" else alt
        records.append(f"{chrom}\t{start + 1}\t.\t{ref}\t{alt}\t.\t.\t.")
        expected.append((chrom, start + 1, ref, alt, header_lines(setup["sequences"]) + len(records), reason))
    return records, expected


def expected_rows(setup, records: list[str]) -> set[tuple]:
    """(pair_id, pos, alt, element) of every scorable allele in every scored pair's windows, by brute force."""
    rows = set()
    for record in records:
        chrom, pos, _, ref, alts = record.split("\t")[:5]
        for alt in alts.split(","):
            if len(alt) != len(ref) or not set(alt) <= set("ACGT"):
                continue
            start, end = int(pos) - 1, int(pos) - 1 + len(ref)
            for window in setup["windows"].itertuples():
                inside = [
                    element
                    for element in ("enhancer", "promoter")
                    if getattr(window, f"{element}_chrom") == chrom
                    and start < getattr(window, f"{element}_end")
                    and end > getattr(window, f"{element}_start")
                ]
                if inside:
                    rows.add((window.pair_id, int(pos), alt, "both" if len(inside) == 2 else inside[0]))
    return rows


def carrying(setup, folder, chrom: str, pos: int, ref: str, alt: str):
    """A copy of the genome FASTA carrying one allele."""
    sequences = dict(setup["sequences"])
    sequence = sequences[chrom]
    assert sequence[pos - 1 : pos - 1 + len(ref)].upper() == ref.upper()
    sequences[chrom] = sequence[: pos - 1] + alt + sequence[pos - 1 + len(alt) :]
    return write_fasta(folder / f"{chrom}_{pos}_{alt}.fa", sequences)


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def acceptance(setup):
    records, expected_unscored = acceptance_records(setup)
    vcf = setup["folder"] / "acceptance.vcf"
    vcf.write_text(vcf_text(setup["sequences"], records))
    out = setup["folder"] / "out" / "variants.tsv"
    run = run_cli(
        "variants", "--model", setup["model"], "--genome", setup["genome"], "--pairs", setup["pairs"],
        "--vcf", vcf, "--out", out,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return {"records": records, "expected_unscored": expected_unscored, "vcf": vcf, "out": out, "stderr": run.stderr}


def read_tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype={"chrom": str, "id": str}, keep_default_na=False)


def test_every_alt_score_is_predict_on_a_genome_carrying_the_variant(setup, acceptance, tmp_path):
    rows = read_tsv(acceptance["out"])
    assert list(rows.columns) == [
        "pair_id", "chrom", "pos", "ref", "alt", "element", "ref_score", "alt_score", "delta", "id", "line",
    ]  # fmt: skip
    found = set(rows[["pair_id", "pos", "alt", "element"]].itertuples(index=False, name=None))
    assert found == expected_rows(setup, acceptance["records"])
    assert {"enhancer", "promoter"} <= set(rows["element"]) and len(rows) >= 7
    assert list(rows.index) == list(rows.sort_values(["pair_id", "pos"], kind="stable").index)
    predict_pairs(setup["model"], setup["genome"], setup["pairs"], tmp_path / "reference.tsv")
    reference = read_tsv(tmp_path / "reference.tsv").set_index("pair_id")["score"]
    np.testing.assert_allclose(rows["ref_score"], reference.loc[rows["pair_id"]], rtol=0, atol=1e-5)
    for (chrom, pos, ref, alt), allele_rows in rows.groupby(["chrom", "pos", "ref", "alt"]):
        genome = carrying(setup, tmp_path, chrom, pos, ref, alt)
        predict_pairs(setup["model"], genome, setup["pairs"], tmp_path / "carrying.tsv")
        carried = read_tsv(tmp_path / "carrying.tsv").set_index("pair_id")["score"]
        np.testing.assert_allclose(allele_rows["alt_score"], carried.loc[allele_rows["pair_id"]], rtol=0, atol=1e-5)
    np.testing.assert_allclose(rows["delta"], rows["alt_score"] - rows["ref_score"], rtol=0, atol=2e-7)
    assert (rows["delta"].abs() > 0).any()


def test_the_alt_copies_are_the_encoding_of_a_genome_carrying_the_allele(setup, acceptance, tmp_path):
    """Byte for byte, whatever the model's sensitivity: each copy equals encoding the windows anew."""
    records = [r.split("\t") for r in acceptance["records"]]
    alleles = pd.DataFrame(
        [(r[0], int(r[1]) - 1, r[3].upper(), alt, r[2], i) for i, r in enumerate(records) for alt in r[4].split(",")],
        columns=["chrom", "start", "ref", "alt", "id", "line"],
    )
    alleles = alleles[(alleles["alt"].str.len() == alleles["ref"].str.len()) & alleles["alt"].str.fullmatch("[ACGT]+")]
    alleles = Alleles(alleles.reset_index(drop=True))
    windows = setup["windows"]
    hits = overlapping_alleles(windows, alleles.by_chromosome(), longest=2)
    with Genome(setup["genome"]) as genome:
        copies = with_alleles(packed_pairs(genome, windows), windows, hits, alleles.table)
    assert len(hits) == len(read_tsv(acceptance["out"]))
    for index, hit in enumerate(hits.itertuples()):
        allele = alleles.table.iloc[hit.allele]
        fasta = carrying(setup, tmp_path, allele["chrom"], allele["start"] + 1, allele["ref"], allele["alt"])
        with Genome(fasta) as genome:
            expected = packed_pairs(genome, windows.iloc[[hit.row]])
        for element in ("enhancer", "promoter"):
            np.testing.assert_array_equal(copies.packed(element, [index]), expected.packed(element, [0]))


def test_variants_no_pair_scores_are_listed_with_line_and_reason(setup, acceptance):
    unscored = read_tsv(acceptance["out"].with_name("variants.unscored.tsv"))
    assert list(unscored.columns) == ["chrom", "pos", "ref", "alt", "line", "reason"]
    assert list(unscored.itertuples(index=False, name=None)) == acceptance["expected_unscored"]
    assert "not scored" in acceptance["stderr"] and "outside_every_window: 1" in acceptance["stderr"]


def test_a_multiallelic_record_gives_one_row_per_alt_allele(acceptance):
    rows = read_tsv(acceptance["out"])
    multi = rows[rows["id"] == "multi"]
    assert multi["alt"].nunique() == 2 and multi["line"].nunique() == 1
    assert len(multi) == 2 * multi["pair_id"].nunique()


def test_an_mnv_across_a_window_edge_changes_only_the_bases_inside(acceptance):
    """(checked against predict above); its row is there, with REF upper-cased."""
    rows = read_tsv(acceptance["out"])
    mnv = rows[rows["id"] == "mnv"]
    assert len(mnv) >= 1 and mnv["ref"].str.isupper().all() and (mnv["ref"].str.len() == 2).all()


def test_a_bgzipped_vcf_gives_the_same_rows_in_chunks_of_any_size(setup, acceptance, tmp_path, monkeypatch):
    compressed = tmp_path / "acceptance.vcf.gz"
    pysam.tabix_compress(str(acceptance["vcf"]), str(compressed))
    monkeypatch.setattr("epiformer.scoring.variants.CHUNK_PAIRS", 3)  # pairs and alleles three at a time
    summary = score_variants(setup["model"], setup["genome"], setup["pairs"], compressed, tmp_path / "v.tsv")
    # Other batches, other float rounding in the model's matrix products: equal to 1e-6.
    pd.testing.assert_frame_equal(read_tsv(tmp_path / "v.tsv"), read_tsv(acceptance["out"]), rtol=0, atol=1e-6)
    assert read_tsv(tmp_path / "v.unscored.tsv").equals(read_tsv(acceptance["out"].with_name("variants.unscored.tsv")))
    assert summary["records"] == len(acceptance["records"]) and summary["unscored"]["indel"] == 1


def bad_vcf(setup, tmp_path, bad_record: str, good: int = 2) -> tuple:
    """A VCF with `good` valid records, then `bad_record`; its path and the bad record's line."""
    window = setup["windows"].iloc[0]
    chrom, start = window["enhancer_chrom"], int(window["enhancer_start"]) + 3
    records = [f"{chrom}\t{start + i + 1}\t.\t{base(setup, chrom, start + i)}\tA\t.\t.\t." for i in range(good)]
    path = tmp_path / "bad.vcf"
    path.write_text(vcf_text(setup["sequences"], [*records, bad_record]))
    return path, header_lines(setup["sequences"]) + good + 1


def ref_mismatch(setup):
    chrom, start = "chr2", 1234
    while base(setup, chrom, start) not in "ACGT":
        start += 1
    found = base(setup, chrom, start)
    return f"{chrom}\t{start + 1}\t.\t{other(found)}\tA\t.\t.\t.", [f"chr2:{start + 1}", f"REF {other(found)}", found]


BAD_RECORDS = {
    "REF disagrees with the genome": (ref_mismatch, ["disagrees with genome", "another build"]),
    "chr prefix differs": (lambda s: ("1\t100\t.\tA\tC\t.\t.\t.", []), ["'1'", "names it 'chr1'", "`chr` prefix"]),
    "unknown chromosome": (lambda s: ("chrZ\t100\t.\tA\tC\t.\t.\t.", []), ["'chrZ'", "chr1, chr2, chr3"]),
    "past the chromosome end": (lambda s: ("chr3\t900000\t.\tA\tC\t.\t.\t.", []), ["past the end", "another build"]),
    "non-numeric POS": (lambda s: ("chr1\t12x\t.\tA\tC\t.\t.\t.", []), ["POS is '12x'", "positive integer"]),
    "too few columns": (lambda s: ("chr1\t100\t.\tA\tC", []), ["5 tab-separated column(s)", "at least 8"]),
    "spaces for tabs": (lambda s: ("chr1 100 . A C . . .", []), ["separated by spaces"]),
    "empty REF": (lambda s: ("chr1\t100\t.\t\tC\t.\t.\t.", []), ["REF is ''"]),
    "empty line": (lambda s: ("", []), ["empty line"]),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_a_bad_record_stops_the_run_naming_file_and_line_and_nothing_is_written(setup, tmp_path, case):
    make, fragments = BAD_RECORDS[case]
    record, more = make(setup)
    path, line = bad_vcf(setup, tmp_path, record)
    if case == "empty line":
        path.write_text(path.read_text() + "chr1\t5\t.\tA\tC\t.\t.\t.\n")  # a blank line between records
    with pytest.raises(VcfError) as raised:
        score_variants(setup["model"], setup["genome"], setup["pairs"], path, tmp_path / "out" / "variants.tsv")
    for fragment in [f"{path}, line {line}:", *fragments, *more]:
        assert fragment in str(raised.value), (fragment, str(raised.value))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("chr1\t5\t.\tA\tC\t.\t.\t.\n", ["line 1", "##fileformat=VCFv4.x"]),
        ("##fileformat=VCFv4.2\nchr1\t5\t.\tA\tC\t.\t.\t.\n", ["line 2", "before the `#CHROM"]),
        ("##fileformat=VCFv4.2\n##contig=<ID=chr1>\n", ["no `#CHROM` header line"]),
    ],
)
def test_a_vcf_without_its_header_is_named(setup, tmp_path, text, fragments):
    path = tmp_path / "headless.vcf"
    path.write_text(text)
    with pytest.raises(VcfError) as raised:
        score_variants(setup["model"], setup["genome"], setup["pairs"], path, tmp_path / "variants.tsv")
    for fragment in [str(path), *fragments]:
        assert fragment in str(raised.value)
    assert not (tmp_path / "variants.tsv").exists()


def test_a_missing_or_truncated_vcf_is_named(setup, tmp_path):
    with pytest.raises(VcfError, match="VCF not found"):
        score_variants(setup["model"], setup["genome"], setup["pairs"], tmp_path / "none.vcf", tmp_path / "v.tsv")
    path, _ = bad_vcf(setup, tmp_path, "chr1\t5\t.\tA\tC\t.\t.\t.")
    compressed = tmp_path / "cut.vcf.gz"
    pysam.tabix_compress(str(path), str(compressed))
    compressed.write_bytes(compressed.read_bytes()[:-60])  # the end cut off
    with pytest.raises(VcfError, match="truncated or corrupt"):
        score_variants(setup["model"], setup["genome"], setup["pairs"], compressed, tmp_path / "v.tsv")
    assert not list(tmp_path.glob("v*.tsv"))


def test_the_cli_reports_a_bad_vcf_in_one_line_and_exits_1(setup, tmp_path):
    path, line = bad_vcf(setup, tmp_path, ref_mismatch(setup)[0])
    run = run_cli(
        "variants", "--model", setup["model"], "--genome", setup["genome"], "--pairs", setup["pairs"],
        "--vcf", path, "--out", tmp_path / "variants.tsv",
    )  # fmt: skip
    assert run.returncode == 1 and f"line {line}" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "variants.tsv").exists() and not (tmp_path / "variants.unscored.tsv").exists()


def test_interval_union_merges_overlapping_and_touching_windows():
    union = IntervalUnion(["c", "c", "c", "d"], [10, 15, 40, 0], [20, 30, 50, 5])
    assert union.overlaps("c", 29, 30) and union.overlaps("c", 5, 11) and union.overlaps("c", 49, 60)
    assert not union.overlaps("c", 30, 40) and not union.overlaps("c", 0, 10) and not union.overlaps("e", 0, 99)
    assert union.overlaps("d", 4, 5) and not union.overlaps("d", 5, 6)
