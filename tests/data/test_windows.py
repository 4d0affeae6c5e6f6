"""epiformer.data.windows: the window rule, and the windows stage as the workflow runs it (build_windows):
real files in, checked outputs or a clear error out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from epiformer.data.encode import encode_shards
from epiformer.data.genome import GenomeError
from epiformer.data.pairs import PairsError
from epiformer.data.shards import load_split
from epiformer.data.splits import SplitError, SplitSpec
from epiformer.data.windows import WindowSpec, build_windows, make_windows, place_windows
from epiformer.sequence.onehot import one_hot, unpack
from tests.helpers import bedtools_getfasta, pairs_frame, require_bedtools


def test_window_rule_centres_on_the_floor_midpoint():
    starts, fits = place_windows([100, 101], [201, 201], 10, [1000, 1000], "shift")
    # centre (100 + 201) // 2 = 150 -> [145, 155); (101 + 201) // 2 = 151 -> [146, 156)
    assert starts.tolist() == [145, 146] and fits.all()
    odd, _ = place_windows([100], [201], 11, [1000], "shift")
    assert odd.tolist() == [145]  # start = centre - W // 2, end = start + W


def test_edges_shift_inside_or_drop():
    shifted, fits = place_windows([0, 990], [10, 1000], 100, [1000, 1000], "shift")
    assert shifted.tolist() == [0, 900] and fits.all()
    _, fits = place_windows([0, 990, 500], [10, 1000, 510], 100, [1000, 1000, 1000], "drop")
    assert fits.tolist() == [False, False, True]
    _, fits = place_windows([10], [20], 100, [50], "shift")
    assert not fits.any()  # a chromosome shorter than the window always drops the pair


SIZES = {"chr1": 10_000, "chr2": 10_000, "chr3": 10_000, "chrS": 50}


def test_make_windows_counts_every_dropped_pair():
    pairs = pairs_frame(
        [
            ("chr1", 1000, 1200, "chr1", 5000, 5100, 1),
            ("chr1", 1000, 1200, "chr1", 5000, 5100, 1),  # exact duplicate
            ("chrS", 10, 20, "chrS", 30, 40, 0),  # chromosome shorter than the window
            ("chr2", 9990, 9999, "chr2", 100, 200, 0),
        ]
    )
    windows, stats = make_windows(pairs, SIZES, WindowSpec(100, 80, edge="drop"))
    assert windows["pair_id"].tolist() == [0]
    assert stats.dropped["duplicate_row"] == 1
    assert stats.dropped["enhancer_window_off_chromosome"] == 2
    row = windows.iloc[0]
    assert (row.enhancer_start, row.enhancer_end, row.promoter_start, row.promoter_end) == (1050, 1150, 5010, 5090)
    assert row.distance == abs(1100 - 5050)


def test_unknown_chromosome_hints_at_the_chr_prefix():
    pairs = pairs_frame([("1", 100, 200, "1", 500, 600, 1)])
    with pytest.raises(PairsError, match=r"line 2: enhancer_chrom '1' is not in the genome.*'chr1'"):
        make_windows(pairs, SIZES, WindowSpec(50, 50))


def test_trans_pairs_need_allow_trans():
    pairs = pairs_frame([("chr1", 100, 200, "chr2", 500, 600, 1)])
    with pytest.raises(PairsError, match="allow_trans"):
        make_windows(pairs, SIZES, WindowSpec(50, 50))
    windows, _ = make_windows(pairs, SIZES, WindowSpec(50, 50, allow_trans=True))
    assert len(windows) == 1


def test_span_input_drops_pairs_over_max_span_and_across_chromosomes_by_reason():
    rng = np.random.default_rng(8)
    rows = [("chr1", int(e), int(e) + 40, "chr1", int(p), int(p) + 30, 1) for e, p in rng.integers(0, 9_800, (60, 2))]
    rows += [("chr1", 100, 200, "chr2", 500, 600, 0), ("chr3", 100, 200, "chr1", 500, 600, 0)]
    pairs = pairs_frame(rows)
    everything, _ = make_windows(pairs, SIZES, WindowSpec(100, 80, allow_trans=True))
    windows, stats = make_windows(pairs, SIZES, WindowSpec(100, 80, allow_trans=True, max_span=3_000))
    # The span, computed here apart from the package: the first window's start to the further window end.
    cis = everything[everything["enhancer_chrom"] == everything["promoter_chrom"]]
    span = np.maximum(cis["enhancer_end"], cis["promoter_end"]) - np.minimum(
        cis["enhancer_start"], cis["promoter_start"]
    )
    expected_kept = set(cis["pair_id"][span <= 3_000])
    assert 0 < len(expected_kept) < len(cis)
    assert set(windows["pair_id"]) == expected_kept
    assert stats.dropped["span_longer_than_max_span"] == len(cis) - len(expected_kept)
    assert stats.dropped["span_across_chromosomes"] == 2
    assert set(stats.dropped_ids["span_longer_than_max_span"]) == set(cis["pair_id"]) - expected_kept
    elements, _ = make_windows(pairs, SIZES, WindowSpec(100, 80, allow_trans=True))
    assert len(elements) == len(pairs)  # no model reads spans (max_span None): no pair dropped for its span


def test_kept_spans_are_what_bedtools_getfasta_reads_within_max_span(genome, tmp_path):
    require_bedtools()
    path, sizes = genome, {name: CHROM_LENGTH for name in ("chr1", "chr2", "chr3")}
    rng = np.random.default_rng(4)
    rows = [("chr1", int(e), int(e) + 20, "chr1", int(p), int(p) + 20, 1) for e, p in rng.integers(50, 900, (30, 2))]
    windows, stats = make_windows(pairs_frame(rows), sizes, WindowSpec(40, 30, max_span=400))
    dropped = stats.dropped_ids["span_longer_than_max_span"]
    assert len(windows) and len(dropped) and len(windows) + len(dropped) == len(rows)
    spans = [
        ("chr1", min(w.enhancer_start, w.promoter_start), max(w.enhancer_end, w.promoter_end))
        for w in windows.itertuples()
    ]
    assert all(len(sequence) <= 400 for sequence in bedtools_getfasta(path, spans, tmp_path))
    everything, _ = make_windows(pairs_frame(rows), sizes, WindowSpec(40, 30))
    long = everything[everything["pair_id"].isin(dropped)]
    long_spans = [
        ("chr1", min(w.enhancer_start, w.promoter_start), max(w.enhancer_end, w.promoter_end))
        for w in long.itertuples()
    ]
    assert all(len(sequence) > 400 for sequence in bedtools_getfasta(path, long_spans, tmp_path))


CHROM_LENGTH = 1_000


@pytest.fixture
def genome(tmp_path):
    """Three chromosomes with soft-masked stretches, N runs and IUPAC codes; 50 bases a line."""
    rng = np.random.default_rng(3)
    path = tmp_path / "genome.fa"
    with open(path, "w") as handle:
        for name in ("chr1", "chr2", "chr3"):
            seq = list(rng.choice(list("ACGT"), CHROM_LENGTH))
            seq[100:180] = [b.lower() for b in seq[100:180]]
            seq[400:460] = "N" * 60
            seq[700:705] = "RYKMS"
            text = "".join(seq)
            handle.write(f">{name}\n" + "".join(text[i : i + 50] + "\n" for i in range(0, len(text), 50)))
    return path


def pair_rows() -> list[tuple]:
    """Pairs on every chromosome, with elements at both chromosome ends."""
    rows = []
    for chrom in ("chr1", "chr2", "chr3"):
        rows += [
            (chrom, 0, 30, chrom, 500, 560, 1),  # enhancer at the start: its window shifts right
            (chrom, 960, 1000, chrom, 200, 240, 0),  # enhancer at the end: its window shifts left
            (chrom, 120, 170, chrom, 980, 1000, 1),  # soft-masked enhancer, promoter at the end
            (chrom, 380, 480, chrom, 690, 720, 0),  # windows over the N run and the IUPAC codes
        ]
    return rows


def write_csv(path, rows, header=True):
    text = "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label\n"
    path.write_text((text if header else "") + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def write_bedpe(path, rows):
    lines = [
        f"{e}\t{es}\t{ee}\t{p}\t{ps}\t{pe}\tp{i}\t.\t.\t.\t{label}"
        for i, (e, es, ee, p, ps, pe, label) in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


SPLIT = SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",))


DEFAULT_SPEC = WindowSpec(100, 80)


def run_stage(tmp_path, pairs, genome, spec=DEFAULT_SPEC, split=SPLIT):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    stats = build_windows(
        pairs, genome, spec, split, out / "windows.tsv", out / "split_audit.tsv", out / "windows_stats.json"
    )
    return out, stats


@pytest.mark.parametrize("fmt", ["targetfinder", "bedpe"])
def test_shards_hold_exactly_what_bedtools_getfasta_returns(genome, tmp_path, fmt):
    require_bedtools()
    rows = pair_rows()
    pairs = (write_csv if fmt == "targetfinder" else write_bedpe)(tmp_path / f"pairs.{fmt}", rows)
    out, stats = run_stage(tmp_path, pairs, genome, WindowSpec(100, 80, max_n_fraction=0.9))
    assert stats["pairs_kept"] == len(rows)
    windows = pd.read_csv(out / "windows.tsv", sep="\t")
    flank = 5
    encode_shards(windows, genome, tmp_path / "shards", flank=flank, shard_size=5)
    for split in ("train", "val", "test"):
        data = load_split(tmp_path / "shards", split)
        frame = windows.set_index("pair_id").loc[data.pair_id]
        for element, length in data.lengths.items():
            decoded = unpack(data.packed(element, np.arange(len(data))), length)
            cores = [
                (c, s, e)
                for c, s, e in zip(frame[f"{element}_chrom"], frame[f"{element}_start"], frame[f"{element}_end"])
            ]
            for row, sequence in enumerate(bedtools_getfasta(genome, cores, tmp_path)):
                np.testing.assert_array_equal(decoded[row, flank:-flank], one_hot([sequence.encode()])[0])
                chrom, start, end = cores[row]
                left = max(0, start - flank)
                left_flank = "N" * (flank - (start - left)) + (
                    bedtools_getfasta(genome, [(chrom, left, start)], tmp_path)[0] if left < start else ""
                )
                np.testing.assert_array_equal(decoded[row, :flank], one_hot([left_flank.encode()])[0])
                right = min(CHROM_LENGTH, end + flank)
                right_flank = bedtools_getfasta(genome, [(chrom, end, right)], tmp_path)[0] if end < right else ""
                right_flank += "N" * (flank - (right - end))
                np.testing.assert_array_equal(decoded[row, -flank:], one_hot([right_flank.encode()])[0])


def test_edge_windows_shift_inside_the_chromosome(genome, tmp_path):
    out, _ = run_stage(tmp_path, write_csv(tmp_path / "p.csv", pair_rows()), genome)
    windows = pd.read_csv(out / "windows.tsv", sep="\t")
    assert windows["enhancer_start"].min() == 0 and windows["enhancer_end"].max() == CHROM_LENGTH
    assert (windows["enhancer_end"] - windows["enhancer_start"] == 100).all()


def test_mostly_n_windows_are_dropped_and_counted(genome, tmp_path):
    rows = pair_rows() + [("chr1", 420, 440, "chr1", 800, 820, 1)]  # enhancer window 380-480: 60% N
    out, stats = run_stage(
        tmp_path, write_csv(tmp_path / "p.csv", rows), genome, WindowSpec(100, 80, max_n_fraction=0.5)
    )
    assert stats["dropped"]["enhancer_window_mostly_n"] == 4  # the new pair and one per chromosome
    assert stats["pairs_kept"] == len(rows) - 4
    assert json.loads((out / "windows_stats.json").read_text()) == stats


def good_rows():
    return [(c, 100 + 200 * i, 150 + 200 * i, c, 600, 650, i % 2) for c in ("chr1", "chr2", "chr3") for i in range(2)]


def replace_line(rows, line, text):
    """CSV text of `rows` with 1-based file line `line` replaced."""
    lines = ["enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label"]
    lines += [",".join(map(str, r)) for r in rows]
    lines[line - 1] = text
    return "\n".join(lines) + "\n"


BAD_INPUTS = {
    "missing column": (
        replace_line(good_rows(), 1, "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,label"),
        PairsError,
        ["line 1", "promoter_end", "Add them"],
    ),
    "non-integer coordinate": (
        replace_line(good_rows(), 3, "chr1,3e2x,350,chr1,600,650,1"),
        PairsError,
        ["line 3", "'3e2x'", "non-negative integer"],
    ),
    "negative coordinate": (
        replace_line(good_rows(), 4, "chr2,-100,150,chr2,600,650,0"),
        PairsError,
        ["line 4", "'-100'", "non-negative integer"],
    ),
    "start not below end": (
        replace_line(good_rows(), 2, "chr1,150,150,chr1,600,650,0"),
        PairsError,
        ["line 2", "enhancer_start is 150", "below enhancer_end"],
    ),
    "unknown chromosome": (
        replace_line(good_rows(), 5, "chr2,100,150,chrUn_1,600,650,0"),
        PairsError,
        ["line 5", "'chrUn_1'", "not in genome", "chr1, chr2, chr3"],
    ),
    "chr prefix": (
        replace_line(good_rows(), 6, "chr2,100,150,3,600,650,0"),
        PairsError,
        ["line 6", "'3'", "'chr3'", "only the `chr` prefix differs"],
    ),
    "label not 0/1": (
        replace_line(good_rows(), 7, "chr3,100,150,chr3,600,650,yes"),
        PairsError,
        ["line 7", "'yes'", "0 or 1"],
    ),
    "trans pair": (
        replace_line(good_rows(), 2, "chr1,100,150,chr2,600,650,0"),
        PairsError,
        ["line 2", "different chromosomes", "allow_trans"],
    ),
    "empty table": (
        "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label\n",
        PairsError,
        ["no pairs", "Add at least one"],
    ),
    "split without positives": (
        replace_line(good_rows(), 7, "chr3,300,350,chr3,600,650,0"),
        SplitError,
        ["test split", "chr3", "no positives"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_stops_with_file_line_value_and_leaves_no_output(genome, tmp_path, case):
    text, error, fragments = BAD_INPUTS[case]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(text)
    with pytest.raises(error) as raised:
        run_stage(tmp_path, pairs, genome, WindowSpec(100, 80))
    message = str(raised.value)
    assert case == "split without positives" or str(pairs) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not any((tmp_path / "out").iterdir())


def test_genome_of_another_build_fails_fast_with_a_hint(genome, tmp_path):
    rows = [("chrX_random", 1, 50, "chrX_random", 300, 350, 1), ("NC_000001", 1, 50, "NC_000001", 300, 350, 0)]
    pairs = write_csv(tmp_path / "p.csv", rows)
    with pytest.raises(GenomeError, match=r"None of the chromosomes.*different builds or naming schemes"):
        run_stage(tmp_path, pairs, genome)


def test_duplicate_rows_are_dropped_and_counted(genome, tmp_path):
    rows = good_rows()
    out, stats = run_stage(tmp_path, write_csv(tmp_path / "p.csv", rows + rows[:2]), genome)
    assert stats["dropped"]["duplicate_row"] == 2 and stats["pairs_kept"] == len(rows)


def test_audit_proves_chromosome_splits_clean_and_shows_the_random_leak(full_demo, tmp_path):
    require_bedtools()
    spec = WindowSpec(256, 224)
    out, stats = run_stage(
        tmp_path,
        full_demo["demo_a"],
        full_demo["genome"],
        spec,
        SplitSpec(val_chromosomes=("chr5",), test_chromosomes=("chr6",)),
    )
    audit = pd.read_csv(out / "split_audit.tsv", sep="\t")
    assert audit[["overlapping_windows", "shared_elements"]].to_numpy().sum() == 0 and not stats["split"]["leak_prone"]
    out, stats = run_stage(tmp_path, full_demo["demo_a"], full_demo["genome"], spec, SplitSpec(mode="random"))
    audit = pd.read_csv(out / "split_audit.tsv", sep="\t").set_index(["split_a", "split_b"])
    assert audit.loc[("train", "test"), "shared_elements"] > 100
    assert audit.loc[("train", "test"), "overlapping_windows"] >= audit.loc[("train", "test"), "shared_elements"]
    assert stats["split"]["leak_prone"] and stats["split"]["mode"] == "random"
