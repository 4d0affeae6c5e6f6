"""epiformer.data.splits: chromosome and random splits of the windows, and the audit of what the splits share."""

import numpy as np
import pytest

from epiformer.data.splits import SplitSpec, assign_splits, split_audit
from epiformer.data.windows import WindowSpec, make_windows
from tests.helpers import pairs_frame, require_bedtools

SIZES = {"chr1": 10_000, "chr2": 10_000, "chr3": 10_000}


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
