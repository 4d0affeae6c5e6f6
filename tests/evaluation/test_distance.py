"""epiformer.evaluation.distance: metrics within distance bins and the distance-matched AUROC, checked against
brute force and scikit-learn; in the summary, a model that learned distance is told from one that did not."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.evaluation.distance import (
    ACROSS_CHROMOSOMES,
    binned_metrics,
    distance_strata,
    matched_auroc,
    matched_auroc_with_interval,
    paired_matched_difference,
)
from epiformer.evaluation.summary import ModelResult, write_summary
from tests.evaluation.test_summary import make_result


def distance_confounded(n: int = 3000, seed: int = 0):
    """Pairs whose label depends on distance (near pairs interact more) and on a hidden sequence signal.

    Returns distances, labels, a score of distance alone, and a score that reads the signal.
    """
    rng = np.random.default_rng(seed)
    distances = (10 ** rng.uniform(4, 6.3, n)).astype(np.int64)  # 10 kb to 2 Mb, log-uniform as real pairs roughly are
    signal = rng.normal(size=n)
    logit = -2.5 * (np.log10(distances) - 5) + 1.5 * signal
    labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    distance_only = -np.log10(distances)
    reads_signal = signal + rng.normal(scale=0.5, size=n)
    return distances, labels, distance_only, reads_signal


def test_each_bin_is_a_quantile_of_the_test_distances_and_its_metrics_are_scikit_learns():
    distances, labels, _, scores = distance_confounded()
    table = binned_metrics(labels, scores, distances, bins=5)
    assert len(table) == 5 and table["n_test"].sum() == len(labels)
    assert table["n_test"].between(590, 610).all()  # quintiles of distinct distances: about a fifth each
    assert (table["distance_low"].diff().dropna() > 0).all()  # ordered, not overlapping
    for row in table.itertuples():
        last = row.Index == len(table) - 1
        inside = (distances >= row.distance_low) & (
            (distances <= row.distance_high) if last else (distances < row.distance_high)
        )
        assert inside.sum() == row.n_test and labels[inside].sum() == row.positives
        assert row.auroc == pytest.approx(roc_auc_score(labels[inside], scores[inside]), abs=1e-12)
        assert row.auprc == pytest.approx(average_precision_score(labels[inside], scores[inside]), abs=1e-12)


def test_pairs_across_chromosomes_get_their_own_bin_and_a_bin_without_both_classes_has_no_metric():
    distances = np.array([-1, -1, -1, 100, 200, 300, 400, 500, 600])
    labels = np.array([1, 0, 1, 1, 1, 1, 0, 1, 0])
    scores = np.linspace(0, 1, 9)
    table = binned_metrics(labels, scores, distances, bins=2)
    assert list(table["bin"])[-1] == ACROSS_CHROMOSOMES
    assert table.set_index("bin").loc[ACROSS_CHROMOSOMES, "n_test"] == 3
    first = table.iloc[0]
    # The median, 300, opens the upper bin ([low, high) but the last, which holds its upper edge).
    assert (first["n_test"], first["positives"]) == (2, 2) and np.isnan(first["auroc"])  # 100 and 200: positives only
    assert table["n_test"].sum() == len(labels)


def test_matched_auroc_counts_only_positive_negative_pairs_of_one_stratum():
    distances, labels, _, scores = distance_confounded(n=400, seed=1)
    scores = np.round(scores, 1)  # ties count half
    strata = distance_strata(distances, 7)
    right = compared = 0.0
    for i, j in itertools.product(np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)):
        if strata[i] == strata[j]:
            compared += 1
            right += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    assert matched_auroc(labels, scores, strata) == pytest.approx(right / compared, abs=1e-12)


def test_distance_alone_scores_high_overall_but_near_chance_when_matched_and_a_signal_survives_matching():
    distances, labels, distance_only, reads_signal = distance_confounded()
    strata = distance_strata(distances, 10)
    assert roc_auc_score(labels, distance_only) > 0.75  # distance dominates the overall AUROC
    value, low, high = matched_auroc_with_interval(labels, distance_only, strata, 300, 0)
    assert 0.45 < value < 0.6 and low < value < high
    value, low, high = matched_auroc_with_interval(labels, reads_signal, strata, 300, 0)
    assert value > 0.7 and low > 0.65
    # A model of distance plus noise gains nothing within distance; one that reads the signal does.
    noisy = distance_only + np.random.default_rng(2).normal(scale=0.05, size=len(labels))
    assert paired_matched_difference(labels, noisy, distance_only, strata, 300, 0)[1] < 0.02
    difference, low, _ = paired_matched_difference(labels, reads_signal, distance_only, strata, 300, 0)
    assert difference > 0.15 and low > 0.1


def test_the_summary_gives_the_within_distance_columns_bins_table_and_verdicts(tmp_path):
    distances, labels, distance_only, reads_signal = distance_confounded()
    pair_ids = np.arange(len(labels)) * 2 + 5
    windows = tmp_path / "cell" / "windows.tsv"
    windows.parent.mkdir(parents=True)
    order = np.random.default_rng(3).permutation(len(labels))  # windows.tsv in another order: joined by pair_id
    pd.DataFrame({"pair_id": pair_ids[order], "distance": distances[order], "split": "test"}).to_csv(
        windows, sep="\t", index=False
    )
    learned_distance = distance_only + np.random.default_rng(4).normal(scale=0.05, size=len(labels))
    results = [
        make_result(tmp_path, "cell", "reads", pair_ids, labels, reads_signal, attention="linear"),
        make_result(tmp_path, "cell", "lengths", pair_ids, labels, learned_distance, attention="softmax"),
        make_result(tmp_path, "cell", "distance", pair_ids, labels, distance_only),
    ]
    results = [ModelResult(**{**vars(result), "windows": windows}) for result in results]
    paths = [tmp_path / name for name in ("summary.tsv", "summary.md", "paired.tsv", "bins.tsv")]
    write_summary(results, *paths[:3], resamples=200, seed=0, distance_bins_path=paths[3], distance_bins=4)
    summary = pd.read_csv(paths[0], sep="\t").set_index("model")
    strata = distance_strata(distances, 10)
    assert summary.loc["reads", "matched_auroc"] == pytest.approx(matched_auroc(labels, reads_signal, strata), abs=1e-3)
    assert summary.loc["reads", "matched_auroc_diff_distance_lo"] > 0.1
    # High overall, as distance is; nothing beyond it within distance.
    assert summary.loc["lengths", "auroc"] > 0.75 and summary.loc["lengths", "matched_auroc_diff_distance_lo"] < 0
    assert np.isnan(summary.loc["distance", "matched_auroc_diff_distance"])
    bins = pd.read_csv(paths[3], sep="\t")
    assert len(bins) == 3 * 4 and set(bins["model"]) == {"reads", "lengths", "distance"}
    expected = binned_metrics(labels, reads_signal, distances, 4)
    np.testing.assert_allclose(bins.query("model == 'reads'")["auroc"], expected["auroc"], atol=1e-3)
    assert summary.loc["reads", "binned_auroc_mean"] == pytest.approx(expected["auroc"].mean(), abs=1e-3)
    markdown = paths[1].read_text()
    assert "| cell | reads |" in markdown and "yes: beyond distance" in markdown
    within = markdown[markdown.index("## Within distance") :].splitlines()
    verdicts = {
        line.split("|")[2].strip(): line.split("|")[-2].strip() for line in within if line.startswith("| cell |")
    }
    assert verdicts["reads"] == "yes: beyond distance" and verdicts["distance (baseline)"] == ""
    assert verdicts["lengths"] in ("not shown: as distance", "no: below distance")  # noise costs it within strata
    chance = {line.split("|")[2].strip(): line.split("|")[5].strip() for line in within if line.startswith("| cell |")}
    assert chance["reads"] == "yes" and chance["distance (baseline)"] in ("yes", "not shown", "no: below")


def test_a_prediction_missing_from_windows_tsv_is_an_error_naming_the_file(tmp_path):
    labels = np.array([0, 1, 0, 1])
    result = make_result(tmp_path, "cell", "distance", np.arange(4), labels, labels * 0.5)
    windows = tmp_path / "cell" / "windows.tsv"
    pd.DataFrame({"pair_id": [0, 1, 2], "distance": [10, 20, 30]}).to_csv(windows, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"predictions.tsv: pair_id 3 .* re-run evaluate"):
        write_summary([ModelResult(**{**vars(result), "windows": windows})], tmp_path / "s.tsv", tmp_path / "s.md")
    assert json.loads(result.metrics.read_text())["n_test"] == 4


def test_tied_distances_never_split_a_bin_and_one_distance_makes_one_bin():
    labels = np.array([0, 1, 0, 1, 1, 0])
    scores = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.4])
    one = binned_metrics(labels, scores, np.full(6, 25_000), bins=5)
    assert len(one) == 1 and one.loc[0, "n_test"] == 6 and one.loc[0, "bin"] == "25-25 kb"
    assert one.loc[0, "auroc"] == pytest.approx(roc_auc_score(labels, scores))
    tied = binned_metrics(labels, scores, np.array([10, 10, 10, 10, 500, 900]) * 1000, bins=5)
    assert tied["n_test"].tolist()[0] == 4  # the four pairs at 10 kb stay together


def test_bin_labels_read_in_kb_without_exponents_at_megabase_distances():
    distances = np.array([30_000, 200_000, 412_000, 1_200_000, 1_900_000, 2_100_000])
    table = binned_metrics(np.array([0, 1, 0, 1, 0, 1]), np.linspace(0, 1, 6), distances, bins=2)
    assert table["bin"].tolist() == ["30-412 kb", "412-2100 kb"]
    assert not table["bin"].str.contains("e").any()


def test_with_a_bootstrap_unit_the_summary_resamples_the_promoters_of_windows_tsv(tmp_path):
    distances, labels, distance_only, reads_signal = distance_confounded(n=600)
    pair_ids, promoters = np.arange(600), np.arange(600) // 6  # 100 promoters of 6 pairs
    windows = tmp_path / "cell" / "windows.tsv"
    windows.parent.mkdir(parents=True)
    elements = {"enhancer_chrom": "chr1", "enhancer_start": pair_ids * 10, "enhancer_end": pair_ids * 10 + 5}
    elements |= {"promoter_chrom": "chr2", "promoter_start": promoters * 10, "promoter_end": promoters * 10 + 5}
    pd.DataFrame({"pair_id": pair_ids, "distance": distances, "split": "test", **elements}).to_csv(
        windows, sep="\t", index=False
    )
    results = [
        make_result(tmp_path, "cell", "reads", pair_ids, labels, reads_signal, attention="linear"),
        make_result(tmp_path, "cell", "distance", pair_ids, labels, distance_only),
    ]
    results = [ModelResult(**{**vars(result), "windows": windows}) for result in results]
    for unit, groups in (("promoter", 100), ("pair", 600)):
        paths = [tmp_path / f"{unit}_{name}" for name in ("summary.tsv", "summary.md", "paired.tsv")]
        write_summary(results, *paths, resamples=100, seed=0, bootstrap_unit=unit)
        paired = pd.read_csv(paths[2], sep="\t")
        assert (paired["bootstrap_unit"] == unit).all() and (paired["bootstrap_groups"] == groups).all()
    summary = pd.read_csv(tmp_path / "promoter_summary.tsv", sep="\t").set_index("model")
    strata = distance_strata(distances, 10)
    _, low, high = matched_auroc_with_interval(labels, reads_signal, strata, 100, 0, promoters)
    assert summary.loc["reads", ["matched_auroc_lo", "matched_auroc_hi"]].tolist() == pytest.approx(
        [low, high], abs=1e-3
    )
    _, low, high = paired_matched_difference(labels, reads_signal, distance_only, strata, 100, 0, promoters)
    assert summary.loc["reads", "matched_auroc_diff_distance_lo"] == pytest.approx(low, abs=1e-3)
    assert summary.loc["reads", "matched_auroc_diff_distance_hi"] == pytest.approx(high, abs=1e-3)
