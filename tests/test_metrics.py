import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score

from epiformer.metrics import best_f1_threshold, compute_metrics, fast_average_precision, fast_roc_auc


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


def test_bootstrap_is_seeded():
    test = scored(200, 2)
    assert compute_metrics(test, None, 100, seed=4) == compute_metrics(test, None, 100, seed=4)


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
