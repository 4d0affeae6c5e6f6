import filecmp
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency, ks_2samp
from sklearn.metrics import roc_auc_score

from epiformer.data.genome import Genome
from epiformer.data.pairs import read_pairs
from epiformer.data.windows import WindowSpec, make_windows
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar
from epiformer.synthetic.demo_long import (
    BACKGROUND_BITS,
    STRONG_BITS,
    LongDemoSpec,
    break_background_sites,
    ctcf_log_odds,
    element_only_ceiling,
    generate_long_demo,
)
from tests.helpers import ctcf_scores

SMALL = LongDemoSpec(n_chromosomes=2, pairs=400, max_distance=20_000)  # ~5 Mb, a few seconds
TINY = LongDemoSpec(n_chromosomes=2, pairs=40, max_distance=8_000)
DEMO_WINDOWS, DEMO_FLANK = WindowSpec(256, 224), 8  # what config/config.yaml reads from the demo


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    paths = generate_long_demo(tmp_path_factory.mktemp("long"), SMALL)
    pairs = read_pairs(paths["demo_long"])
    truth = pd.read_csv(paths["demo_long_truth"], sep="\t", na_values=".")
    return paths, pairs, truth


def centres(pairs: pd.DataFrame, element: str) -> pd.Series:
    return (pairs[f"{element}_start"] + pairs[f"{element}_end"]) // 2


def test_same_seed_same_bytes_other_seed_other_files(tmp_path):
    first, again = generate_long_demo(tmp_path / "a", TINY), generate_long_demo(tmp_path / "b", TINY)
    assert set(first) == {"genome", "demo_long", "demo_long_truth", "demo_long_ceiling"}
    for name, path in first.items():
        assert filecmp.cmp(path, again[name], shallow=False), name
    other = generate_long_demo(tmp_path / "c", replace(TINY, seed=99))
    for name in ("genome", "demo_long", "demo_long_truth"):
        assert not filecmp.cmp(first[name], other[name], shallow=False), name


def test_pairs_read_back_aligned_with_truth_and_distances_in_range(small):
    _, pairs, truth = small
    assert pairs.attrs["format"] == "targetfinder" and len(pairs) == SMALL.pairs
    assert truth["pair_id"].tolist() == list(range(len(pairs)))
    assert truth["label"].tolist() == pairs["label"].tolist()
    distance = (centres(pairs, "enhancer") - centres(pairs, "promoter")).abs()
    assert distance.tolist() == truth["distance"].tolist()
    assert distance.between(SMALL.min_distance, SMALL.max_distance).all()
    assert (pairs.enhancer_chrom == pairs.promoter_chrom).all()


def test_insulators_are_strong_ctcf_clusters_between_the_windows_and_nowhere_else(small):
    paths, pairs, truth = small
    genome = Genome(paths["genome"])
    windows, _ = make_windows(pairs, genome.sizes, DEMO_WINDOWS, genome)
    assert len(windows) == len(pairs)
    left = np.minimum(centres(pairs, "enhancer"), centres(pairs, "promoter"))
    right = np.maximum(centres(pairs, "enhancer"), centres(pairs, "promoter"))
    for n, row in truth.iterrows():
        chrom = pairs.enhancer_chrom[n]
        start, end = left[n] - 2_000, right[n] + 2_000  # the whole locus
        scores = ctcf_scores(genome.fetch(chrom, start, end))
        strong, background = (
            start + np.flatnonzero(scores >= STRONG_BITS),
            start + np.flatnonzero(scores >= BACKGROUND_BITS),
        )
        if not row.insulated:
            assert len(background) == 0, f"pair {n}: a CTCF site in an open locus"
            continue
        assert len(strong) >= SMALL.insulator_sites, f"pair {n}: only {len(strong)} strong CTCF sites"
        assert (background >= row.insulator_start).all() and (background + 19 <= row.insulator_end).all()
        assert row.insulator_start >= left[n] + SMALL.clearance and row.insulator_end <= right[n] - SMALL.clearance
        for element in ("enhancer", "promoter"):
            window = windows.loc[n, f"{element}_start"] - DEMO_FLANK, windows.loc[n, f"{element}_end"] + DEMO_FLANK
            assert row.insulator_end <= window[0] or window[1] <= row.insulator_start, f"pair {n}: {element}"
    assert truth["insulated"].mean() == pytest.approx(SMALL.insulated_fraction, abs=0.1)


def test_labels_are_drawn_from_each_class_probability(small):
    _, _, truth = small
    expected = {("partners", 0): SMALL.p_open, ("partners", 1): SMALL.p_blocked}
    for (kind, insulated), group in truth.groupby(["pair_class", "insulated"]):
        p = expected.get((kind, insulated), SMALL.p_background)
        assert (group["p_interact"] == p).all()
        assert abs(group["label"].mean() - p) < 4 * np.sqrt(p * (1 - p) / len(group)) + 0.01, (kind, insulated)
    shares = truth["pair_class"].value_counts(normalize=True)
    assert shares["partners"] == pytest.approx(SMALL.partner_fraction, abs=0.08)
    assert shares["hard"] == pytest.approx(SMALL.hard_fraction, abs=0.08)


def test_nothing_the_element_windows_hold_tells_insulation(small):
    paths, pairs, truth = small
    insulated = truth["insulated"].to_numpy()
    partners = (truth["pair_class"] == "partners").to_numpy()
    # Insulated and open partner pairs come from the same distance distribution.
    assert (
        ks_2samp(truth["distance"][partners & (insulated == 1)], truth["distance"][partners & (insulated == 0)]).pvalue
        > 0.01
    )
    assert abs(roc_auc_score(insulated, truth["distance"]) - 0.5) < 0.06
    # Motifs: the insulated rate does not depend on the (enhancer, promoter) motif pair.
    motifs = truth["enhancer_motifs"] + "/" + truth["promoter_motifs"]
    assert chi2_contingency(pd.crosstab(motifs, insulated)).pvalue > 0.01
    # GC of each element window, as the demo's windows read it.
    genome = Genome(paths["genome"])
    windows, _ = make_windows(pairs, genome.sizes, DEMO_WINDOWS, genome)
    for element in ("enhancer", "promoter"):
        sequences = genome.fetch_many(windows.enhancer_chrom, windows[f"{element}_start"], windows[f"{element}_end"])
        gc = np.isin(sequences, np.frombuffer(b"GC", np.uint8)).mean(axis=1)
        assert abs(roc_auc_score(insulated, gc) - 0.5) < 0.06, element


def test_written_ceiling_equals_the_auroc_recomputed_from_truth(small):
    paths, _, truth = small
    ceiling = json.loads(paths["demo_long_ceiling"].read_text())
    # What two element windows can tell: whether the elements are partners, not whether they are insulated.
    partners = truth["pair_class"] == "partners"
    element_only = np.where(partners, truth["p_interact"][partners].mean(), SMALL.p_background)
    assert ceiling["sample"]["element_only_auroc"] == pytest.approx(
        roc_auc_score(truth["label"], element_only), abs=1e-12
    )
    assert ceiling["sample"]["oracle_auroc"] == pytest.approx(
        roc_auc_score(truth["label"], truth["p_interact"]), abs=1e-12
    )
    hard_negatives = (truth["pair_class"] != "easy") & (truth["label"] == 0)
    blocked = partners & (truth["insulated"] == 1)
    share = (hard_negatives & blocked).sum() / hard_negatives.sum()
    assert ceiling["sample"]["insulated_share_of_hard_negatives"] == pytest.approx(share, abs=1e-12)
    assert ceiling["positives"] == truth["label"].sum() and ceiling["spec"]["pairs"] == SMALL.pairs
    for key, value in ceiling["population"].items():
        assert ceiling["sample"][key] == pytest.approx(value, abs=0.05), key


def test_element_only_ceiling_is_well_below_the_oracle_and_matches_a_large_draw():
    spec = LongDemoSpec()
    ceiling = element_only_ceiling(spec)
    assert ceiling["oracle_auroc"] - ceiling["element_only_auroc"] >= 0.1
    assert ceiling["insulated_share_of_hard_negatives"] > 0.4
    # Monte Carlo of the generator's classes, independent of the analytic sum.
    rng = np.random.default_rng(0)
    n = 400_000
    draw = rng.random(n)
    partners, insulated = draw < spec.partner_fraction, rng.random(n) < spec.insulated_fraction
    p = np.where(partners, np.where(insulated, spec.p_blocked, spec.p_open), spec.p_background)
    labels = rng.random(n) < p
    mixture = np.where(partners, p[partners].mean(), spec.p_background)
    assert ceiling["oracle_auroc"] == pytest.approx(roc_auc_score(labels, p), abs=0.003)
    assert ceiling["element_only_auroc"] == pytest.approx(roc_auc_score(labels, mixture), abs=0.003)
    assert ceiling["positive_rate"] == pytest.approx(labels.mean(), abs=0.003)


def test_spec_without_room_for_an_insulator_is_refused():
    with pytest.raises(ValueError, match="min_distance"):
        LongDemoSpec(min_distance=2_000)
    with pytest.raises(ValueError, match="fractions"):
        LongDemoSpec(partner_fraction=0.7, hard_fraction=0.4)


# chr2:3,487,060-3,487,096 of LongDemoSpec(pairs=3000, n_chromosomes=5, max_distance=20000) before breaking, soft-masked
# here: a reverse-strand site at 4 (17.2 bits) overlaps a forward-strand one at 14 (below BACKGROUND_BITS). Both break
# best at base 18, whose G->C broke the first and made the second (19.2), whose C->G then remade the first, for ever.
PING_PONG = b"GGCGggccgccatcttgcggccaggGGGCACAAGAT"


@pytest.mark.parametrize("insulator", [None, (14, 33)])
def test_overlapping_background_sites_are_broken_without_undoing_each_other(insulator):
    log_odds = ctcf_log_odds(read_jaspar(bundled_jaspar_path())["CTCF"])
    assert (ctcf_scores(PING_PONG.upper()) >= BACKGROUND_BITS).tolist() == [i == 4 for i in range(len(PING_PONG) - 18)]
    sequence = bytearray(PING_PONG)
    loci = [{"chrom": "chr1", "insulated": insulator is not None, "insulator": insulator}]
    assert break_background_sites({"chr1": sequence}, loci, log_odds) >= 1
    start, end = insulator or (0, 0)
    outside = [i for i in range(len(sequence) - 18) if not start <= i <= end - 19]  # sites not wholly in the insulator
    assert (ctcf_scores(bytes(sequence).upper())[outside] < BACKGROUND_BITS).all()
    assert sequence[start:end] == PING_PONG[start:end]  # protected: broken elsewhere, here at 4 to 13
    assert [chr(b).islower() for b in sequence] == [chr(b).islower() for b in PING_PONG]  # soft-masking kept
