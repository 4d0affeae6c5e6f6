import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score

from epiformer.evaluation.metrics import (
    best_f1_threshold,
    bootstrap_interval,
    compute_metrics,
    fast_average_precision,
    fast_roc_auc,
    paired_bootstrap_difference,
)
from tests.helpers import independent_paired_interval, shared_difficulty

METRICS = {"auroc": roc_auc_score, "auprc": average_precision_score}


def scored(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.25
    scores = np.clip(rng.normal(0.3 + 0.3 * labels, 0.2), 0, 1)
    return pd.DataFrame({"pair_id": range(n), "label": labels.astype(int), "score": scores})


def test_metrics_equal_scikit_learn_with_the_validation_threshold():
    test, val = scored(400, 0), scored(300, 1)
    metrics = compute_metrics(test, val, resamples=200, seed=0)
    threshold = best_f1_threshold(val["label"], val["score"])
    assert metrics["threshold"] == threshold
    assert metrics["auroc"] == pytest.approx(roc_auc_score(test["label"], test["score"]))
    assert metrics["auprc"] == pytest.approx(average_precision_score(test["label"], test["score"]))
    assert metrics["f1"] == pytest.approx(f1_score(test["label"], test["score"] >= threshold))
    assert metrics["mcc"] == pytest.approx(matthews_corrcoef(test["label"], test["score"] >= threshold))
    assert metrics["positives"] + metrics["negatives"] == metrics["n_test"] == 400
    low, high = metrics["auroc_ci95"]
    assert low < metrics["auroc"] < high and high - low < 0.2


def test_best_f1_threshold_separates_perfect_scores():
    labels = np.array([0, 0, 1, 1])
    assert best_f1_threshold(labels, np.array([0.1, 0.2, 0.8, 0.9])) == 0.8


def independent_interval(labels, scores, metric, resamples, seed):
    """The percentile 95% interval recomputed apart from evaluation.metrics: seeded draws holding both classes."""
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(labels), len(labels)) for _ in range(resamples)]
    values = [metric(labels[rows], scores[rows]) for rows in draws if 0 < labels[rows].sum() < len(rows)]
    return list(np.percentile(values, [2.5, 97.5]))


def test_bootstrap_is_seeded_and_another_seed_draws_other_resamples():
    test = scored(200, 2)
    labels, scores = test["label"].to_numpy(), test["score"].to_numpy()
    first = compute_metrics(test, None, 100, seed=4)
    assert compute_metrics(test, None, 100, seed=4) == first
    other = compute_metrics(test, None, 100, seed=5)
    for name, metric in METRICS.items():
        assert first[f"{name}_ci95"] == pytest.approx(independent_interval(labels, scores, metric, 100, 4), abs=1e-12)
        assert other[f"{name}_ci95"] == pytest.approx(independent_interval(labels, scores, metric, 100, 5), abs=1e-12)
        assert other[f"{name}_ci95"] != first[f"{name}_ci95"]
    point = {key: value for key, value in first.items() if not key.endswith("_ci95")}
    assert {key: value for key, value in other.items() if not key.endswith("_ci95")} == point  # no seed in these


def test_fast_metrics_equal_scikit_learn_with_ties_and_duplicated_rows():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 300))
        labels = rng.integers(0, 2, n)
        if labels.sum() in (0, n):
            continue
        scores = np.round(rng.random(n) + 0.3 * labels, int(rng.integers(1, 4)))  # many ties
        rows = rng.integers(0, n, n)  # a bootstrap resample: duplicated rows
        if labels[rows].sum() in (0, n):
            continue
        for fast, reference in ((fast_roc_auc, roc_auc_score), (fast_average_precision, average_precision_score)):
            assert fast(labels[rows], scores[rows]) == pytest.approx(reference(labels[rows], scores[rows]), abs=1e-12)


@pytest.mark.parametrize("name", METRICS)
def test_point_difference_is_scikit_learns_and_interval_comes_from_paired_resamples(name):
    labels, model, baseline = shared_difficulty()
    metric = METRICS[name]
    result = paired_bootstrap_difference(labels, model, baseline, metric, resamples=300, seed=3)
    assert result["difference"] == pytest.approx(metric(labels, model) - metric(labels, baseline), abs=1e-12)
    (low, high), kept = independent_paired_interval(labels, model, baseline, metric, 300, 3)
    assert (result["lo"], result["hi"]) == pytest.approx((low, high), abs=1e-12) and result["resamples_used"] == kept


@pytest.mark.parametrize("name", METRICS)
def test_resamples_without_both_classes_are_skipped(name):
    labels = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0, 0])  # about one resample in nine draws no positive
    model, baseline = np.random.default_rng(0).random((2, 10))
    result = paired_bootstrap_difference(labels, model, baseline, METRICS[name], resamples=400, seed=2)
    (low, high), kept = independent_paired_interval(labels, model, baseline, METRICS[name], 400, 2)
    assert result["resamples_used"] == kept < 380
    assert (result["lo"], result["hi"]) == pytest.approx((low, high), abs=1e-12)


@pytest.mark.parametrize("name", METRICS)
def test_identical_scores_give_exactly_zero(name):
    labels, model, _ = shared_difficulty()
    result = paired_bootstrap_difference(labels, model, model.copy(), METRICS[name], resamples=200, seed=0)
    assert (result["difference"], result["lo"], result["hi"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("name", METRICS)
def test_pairing_finds_a_difference_that_overlapping_separate_intervals_hide(name):
    labels, model, baseline = shared_difficulty()
    metric = METRICS[name]
    model_lo, model_hi = bootstrap_interval(labels, model, metric, 500, seed=1)
    baseline_lo, baseline_hi = bootstrap_interval(labels, baseline, metric, 500, seed=1)
    assert model_lo < baseline_hi and baseline_lo < model_hi  # the separate intervals overlap
    paired = paired_bootstrap_difference(labels, model, baseline, metric, resamples=500, seed=1)
    assert paired["lo"] > 0  # yet the model is better on the same pairs
    # Unpaired resampling (independent draws for each) blurs the difference: its interval is wider.
    rng = np.random.default_rng(1)
    unpaired = []
    for _ in range(500):
        rows_a, rows_b = rng.integers(0, len(labels), (2, len(labels)))
        unpaired.append(metric(labels[rows_a], model[rows_a]) - metric(labels[rows_b], baseline[rows_b]))
    unpaired_lo, unpaired_hi = np.percentile(unpaired, [2.5, 97.5])
    assert paired["hi"] - paired["lo"] < 0.5 * (unpaired_hi - unpaired_lo)


def test_seed_changes_the_interval_and_the_same_seed_reproduces_it():
    labels, model, baseline = shared_difficulty()
    first = paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=5)
    assert paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=5) == first
    other = paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=6)
    assert (other["lo"], other["hi"]) != (first["lo"], first["hi"])
    assert other["difference"] == first["difference"]  # the point difference does not depend on the seed
