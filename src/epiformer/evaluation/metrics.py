"""The metrics of `metrics.json` and the paired comparisons, from scores alone (no PyTorch).

`predictions.tsv`: pair_id, label, score (probability) for every test pair (`epiformer.io.predictions`).
`metrics.json`: AUROC and AUPRC with seeded bootstrap 95% intervals, F1, MCC and balanced
accuracy at the threshold that maximises F1 on the validation split, class counts and the
split mode. Every value is scikit-learn's on `predictions.tsv` (tested).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import (
    average_precision_score,
    balanced_accuracy_score,
    f1_score,
    matthews_corrcoef,
    precision_recall_curve,
    roc_auc_score,
)


def best_f1_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    precision, recall, thresholds = precision_recall_curve(labels, scores)
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    return float(thresholds[int(np.argmax(f1[:-1]))])


def bootstrap_rows(labels: np.ndarray, resamples: int, seed: int):
    """Row indices of each of `resamples` seeded draws with replacement, skipping draws that lack a class.

    Every bootstrap here draws through this, so the same seed resamples the same pairs.
    """
    rng = np.random.default_rng(seed)
    for _ in range(resamples):
        rows = rng.integers(0, len(labels), len(labels))
        if 0 < labels[rows].sum() < len(rows):
            yield rows


def percentile_interval(values) -> list[float]:
    """The 2.5th and 97.5th percentiles of the defined values (a metric may be undefined on a draw); NaN if none."""
    values = [value for value in values if not np.isnan(value)]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else [np.nan, np.nan]


def bootstrap_interval(labels, scores, metric, resamples: int, seed: int) -> list[float]:
    """Percentile 95% interval of `metric` over resamples that hold both classes.

    `scores` may have more columns than one (rows are drawn whole) for a metric that reads them.
    """
    return percentile_interval(metric(labels[rows], scores[rows]) for rows in bootstrap_rows(labels, resamples, seed))


def _ranked_counts(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """True and false positives at each distinct score, highest first (sklearn's `_binary_clf_curve`)."""
    order = np.argsort(-scores, kind="mergesort")
    ranked, hits = scores[order], labels[order]
    last_of_each_score = np.r_[np.flatnonzero(np.diff(ranked)), len(ranked) - 1]
    true_positives = np.cumsum(hits)[last_of_each_score]
    return true_positives, last_of_each_score + 1 - true_positives


def fast_roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """`sklearn.metrics.roc_auc_score` for 0/1 labels (ties count half), ~20x faster: for bootstrap loops."""
    true_positives, false_positives = _ranked_counts(labels, scores)
    tpr, fpr = np.r_[0, true_positives] / true_positives[-1], np.r_[0, false_positives] / false_positives[-1]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1])) / 2)


def fast_average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """`sklearn.metrics.average_precision_score` for 0/1 labels, ~20x faster: for bootstrap loops."""
    true_positives, false_positives = _ranked_counts(labels, scores)
    precision = true_positives / (true_positives + false_positives)
    recall = np.r_[0, true_positives] / true_positives[-1]
    return float(np.sum(np.diff(recall) * precision))


def paired_bootstrap_difference(labels, scores_a, scores_b, metric, resamples: int, seed: int) -> dict:
    """`metric(a) - metric(b)` on the same pairs, with a paired percentile 95% bootstrap interval.

    `labels`, `scores_a` and `scores_b` are [N] arrays (scores may be [N, k] rows, drawn whole) over the same
    pairs in the same order.
    Each resample draws N rows with replacement (`bootstrap_rows`: the draws `bootstrap_interval`
    makes with this seed) and scores a and b on those same rows, so what the two share (pairs that are easy
    or hard for both) cancels in the difference; resamples that lack a class are skipped.
    Returns `difference` (on all N rows), `lo`, `hi` (nan when no resample held both classes)
    and `resamples_used`.
    """
    labels, scores_a, scores_b = np.asarray(labels), np.asarray(scores_a), np.asarray(scores_b)
    values = [
        metric(labels[rows], scores_a[rows]) - metric(labels[rows], scores_b[rows])
        for rows in bootstrap_rows(labels, resamples, seed)
    ]
    low, high = percentile_interval(values)
    return {
        "difference": float(metric(labels, scores_a) - metric(labels, scores_b)),
        "lo": float(low),
        "hi": float(high),
        "resamples_used": len(values),
    }


def compute_metrics(test: pd.DataFrame, val: pd.DataFrame | None, resamples: int = 1000, seed: int = 0) -> dict:
    """Metrics of test predictions (columns label, score); the threshold comes from `val`."""
    labels, scores = test["label"].to_numpy(int), test["score"].to_numpy(float)
    metrics = {
        "n_test": int(len(labels)),
        "positives": int(labels.sum()),
        "negatives": int(len(labels) - labels.sum()),
        "auroc": float(roc_auc_score(labels, scores)),
        "auprc": float(average_precision_score(labels, scores)),
        "auroc_ci95": bootstrap_interval(labels, scores, roc_auc_score, resamples, seed),
        "auprc_ci95": bootstrap_interval(labels, scores, average_precision_score, resamples, seed),
        "prevalence": float(labels.mean()),
    }
    if val is not None:
        threshold = best_f1_threshold(val["label"].to_numpy(int), val["score"].to_numpy(float))
        predicted = scores >= threshold
        metrics.update(
            threshold=threshold,
            f1=float(f1_score(labels, predicted)),
            mcc=float(matthews_corrcoef(labels, predicted)),
            balanced_accuracy=float(balanced_accuracy_score(labels, predicted)),
        )
    return metrics
