import numpy as np
import pandas as pd
import pytest

from epiformer.pairs import PairsError
from epiformer.splits import SplitSpec, assign_splits, split_audit
from epiformer.windows import WindowSpec, make_windows, place_windows
from tests.helpers import require_bedtools


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


def pairs_frame(rows):
    columns = [
        "enhancer_chrom",
        "enhancer_start",
        "enhancer_end",
        "promoter_chrom",
        "promoter_start",
        "promoter_end",
        "label",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.insert(0, "pair_id", range(len(frame)))
    frame.attrs.update(path="pairs.csv", header_lines=1)
    return frame


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
    windows, report = make_windows(pairs, SIZES, WindowSpec(100, 80, edge="drop"))
    assert windows["pair_id"].tolist() == [0]
    assert report.dropped["duplicate_row"] == 1
    assert report.dropped["enhancer_window_off_chromosome"] == 2
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


def random_pairs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    chroms = rng.choice(["chr1", "chr2", "chr3"], n)
    e = rng.integers(0, 9000, n)
    p = rng.integers(0, 9000, n)
    return pairs_frame(list(zip(chroms, e, e + 200, chroms, p, p + 150, rng.integers(0, 2, n))))


def test_chromosome_split_and_audit_show_no_overlap():
    require_bedtools()
    windows, _ = make_windows(random_pairs(), SIZES, WindowSpec(100, 100))
    windows = assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
    assert set(windows.loc[windows.split == "test", "enhancer_chrom"]) == {"chr3"}
    audit = split_audit(windows)
    assert audit["overlapping_windows"].tolist() == [0, 0, 0]
    assert audit["windows_a"].iloc[0] > 0


def brute_force_overlaps(windows, first, second):
    def intervals(split):
        part = windows[windows.split == split]
        return {
            (r[f"{e}_chrom"], r[f"{e}_start"], r[f"{e}_end"])
            for _, r in part.iterrows()
            for e in ("enhancer", "promoter")
        }

    b = intervals(second)
    return sum(any(c == c2 and s < e2 and s2 < e for c2, s2, e2 in b) for c, s, e in intervals(first))


def test_random_split_is_stratified_and_its_audit_matches_brute_force():
    require_bedtools()
    windows, _ = make_windows(random_pairs(), SIZES, WindowSpec(100, 100))
    windows = assign_splits(windows, SplitSpec(mode="random", test_fraction=0.2, val_fraction=0.1, seed=3))
    rates = windows.groupby("split")["label"].mean()
    assert rates.max() - rates.min() < 0.05
    audit = split_audit(windows).set_index(["split_a", "split_b"])
    assert audit.loc[("train", "test"), "overlapping_windows"] == brute_force_overlaps(windows, "train", "test") > 0


def test_split_without_positives_names_the_split_and_chromosomes():
    windows, _ = make_windows(random_pairs(), SIZES, WindowSpec(100, 100))
    windows.loc[windows.enhancer_chrom == "chr3", "label"] = 0
    with pytest.raises(ValueError, match=r"test split \(chromosomes chr3\) has no positives"):
        assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
