"""The metrics of `metrics.json` and the paired comparisons, from scores alone (no PyTorch).

`predictions.tsv`: pair_id, label, score (probability) for every test pair (`epiformer.io.predictions`).
`metrics.json`: AUROC and AUPRC (average precision) with seeded bootstrap 95% intervals, the
CRISPRi benchmark's AUPRC (a trapezoid) and precision at 70% recall with theirs, F1, MCC and balanced
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

from epiformer.constants import BOOTSTRAP_UNITS


def best_f1_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    precision, recall, thresholds = precision_recall_curve(labels, scores)
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    return float(thresholds[int(np.argmax(f1[:-1]))])


def bootstrap_rows(labels: np.ndarray, resamples: int, seed: int, groups: np.ndarray | None = None):
    """Row indices of each of `resamples` seeded draws with replacement, skipping draws that lack a class.

    Without `groups`, each draw takes N rows. With `groups` ([N] labels of the unit of dependence,
    `dependence_groups`), each draw takes as many groups as there are, with replacement, and every
    row of each group drawn: pairs that share an element stay together, so the interval counts the
    groups, not the pairs, as the independent observations. One pair a group draws exactly the
    pairs' resamples. Every bootstrap here draws through this, so the same seed (and groups)
    resamples the same pairs for every model of a cell line.
    """
    rng = np.random.default_rng(seed)
    if groups is None:
        for _ in range(resamples):
            rows = rng.integers(0, len(labels), len(labels))
            if 0 < labels[rows].sum() < len(rows):
                yield rows
        return
    members, starts, sizes = _group_members(np.asarray(groups))
    for _ in range(resamples):
        drawn = rng.integers(0, len(sizes), len(sizes))
        lengths = sizes[drawn]
        # Row k of the draw is member (k - its group's first k) of its group: one gather for all groups.
        first = np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows = members[np.repeat(starts[drawn], lengths) + np.arange(lengths.sum()) - first]
        if 0 < labels[rows].sum() < len(rows):
            yield rows


def _group_members(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ordered by group (first appearance order, rows in order within), each group's first index there, sizes."""
    codes = pd.factorize(groups)[0]  # numbered in order of first appearance
    sizes = np.bincount(codes)
    return np.argsort(codes, kind="stable"), np.cumsum(sizes) - sizes, sizes


def group_count(groups: np.ndarray | None, pairs: int) -> int:
    """How many groups a bootstrap resamples: `pairs` without groups."""
    return pairs if groups is None else len(pd.unique(groups))


def dependence_groups(windows: pd.DataFrame, unit: str) -> np.ndarray:
    """int [N]: the group of each windows.tsv row that a clustered bootstrap resamples whole (`bootstrap_rows`).

    - `element`: pairs joined by a shared enhancer or a shared promoter, transitively (the connected
      components of the enhancer-promoter graph): every pair that shares a window with another is in
      its group, so no dependence through a shared element is left between groups.
    - `promoter`: pairs of the same promoter window; pairs sharing only an enhancer fall in different groups.
    - `pair`: every pair its own group (the pair bootstrap).

    Elements are windows.tsv's coordinates (chromosome, start, end), so the same element of two pairs is the
    same window whatever the input table named it.
    """
    if unit not in BOOTSTRAP_UNITS:
        raise ValueError(f"bootstrap unit {unit!r}: use one of {', '.join(BOOTSTRAP_UNITS)}")
    if unit == "pair":
        return np.arange(len(windows))
    promoters = _element_codes(windows, "promoter")
    if unit == "promoter":
        return promoters
    enhancers = _element_codes(windows, "enhancer")
    return _shared_element_components(enhancers, promoters)


def groups_of_pairs(windows: pd.DataFrame, pair_ids, unit: str, where: str = "windows.tsv") -> np.ndarray:
    """int [len(pair_ids)]: `dependence_groups` among these pairs (the test pairs, in their order), from the
    cell line's windows.tsv rows; fails naming `where` when a pair is not there."""
    table = windows.drop_duplicates("pair_id").set_index("pair_id")
    pair_ids = np.asarray(pair_ids)
    missing = ~np.isin(pair_ids, table.index.to_numpy())
    if missing.any():
        raise ValueError(
            f"{where}: pair_id {pair_ids[missing][0]} ({int(missing.sum())} in all) of the predictions is not in it; "
            "the predictions come from another windows.tsv: re-run the workflow from its windows step."
        )
    return dependence_groups(table.loc[pair_ids].reset_index(), unit)


def _shared_element_components(enhancers: np.ndarray, promoters: np.ndarray) -> np.ndarray:
    """int [N]: one label per connected group of pairs, pairs joined by a shared enhancer or promoter code."""
    offset = int(enhancers.max()) + 1 if len(enhancers) else 0
    parent = list(range(offset + (int(promoters.max()) + 1 if len(promoters) else 0)))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving keeps the trees flat
            node = parent[node]
        return node

    for enhancer, promoter in zip(enhancers.tolist(), (promoters + offset).tolist()):
        parent[root(enhancer)] = root(promoter)
    return np.array([root(enhancer) for enhancer in enhancers.tolist()], dtype=np.int64)


def _element_codes(windows: pd.DataFrame, element: str) -> np.ndarray:
    columns = [f"{element}_chrom", f"{element}_start", f"{element}_end"]
    return windows.groupby(columns, sort=False).ngroup().to_numpy()


def percentile_interval(values) -> list[float]:
    """The 2.5th and 97.5th percentiles of the defined values (a metric may be undefined on a draw); NaN if none."""
    values = [value for value in values if not np.isnan(value)]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else [np.nan, np.nan]


def bootstrap_interval(labels, scores, metric, resamples: int, seed: int, groups=None) -> list[float]:
    """Percentile 95% interval of `metric` over resamples that hold both classes (whole `groups`, if given).

    `scores` may have more columns than one (rows are drawn whole) for a metric that reads them.
    """
    draws = bootstrap_rows(labels, resamples, seed, groups)
    return percentile_interval(metric(labels[rows], scores[rows]) for rows in draws)


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


def benchmark_auprc(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUPRC by the CRISPRi benchmark's rule (EngreitzLab/CRISPR_comparison, `calculate_auprc`): the trapezoid
    under the precision-recall points of each distinct score, highest first, less the curve's start (recall 0,
    precision 1) and its two lowest-score points (its last point, full recall, drawn whether or not a
    predictor reaches it). Average precision (`auprc` elsewhere) is a step sum instead: 0.4377 where this gives
    0.4359 for distance on the K562 benchmark, the figure its authors publish."""
    true_positives, false_positives = _ranked_counts(np.asarray(labels, int), np.asarray(scores, float))
    precision = true_positives / (true_positives + false_positives)
    recall = true_positives / true_positives[-1]
    precision, recall = precision[:-2], recall[:-2]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1])) / 2) if len(recall) > 1 else float("nan")


def precision_at_recall(labels: np.ndarray, scores: np.ndarray, recall: float = 0.7) -> float:
    """Precision at the highest score threshold that recalls at least `recall` of the positives: the CRISPRi
    benchmark's second figure (precision at 70% recall; CRISPR_comparison's `calculate_performance_at_threshold`)."""
    true_positives, false_positives = _ranked_counts(np.asarray(labels, int), np.asarray(scores, float))
    first = int(np.argmax(true_positives >= recall * true_positives[-1]))
    return float(true_positives[first] / (true_positives[first] + false_positives[first]))


def paired_bootstrap_difference(labels, scores_a, scores_b, metric, resamples: int, seed: int, groups=None) -> dict:
    """`metric(a) - metric(b)` on the same pairs, with a paired percentile 95% bootstrap interval.

    `labels`, `scores_a` and `scores_b` are [N] arrays (scores may be [N, k] rows, drawn whole) over the same
    pairs in the same order.
    Each resample draws N rows with replacement, or whole `groups` (`bootstrap_rows`: the draws
    `bootstrap_interval` makes with this seed) and scores a and b on those same rows, so what the two share
    (pairs that are easy or hard for both) cancels in the difference; resamples that lack a class are skipped.
    Returns `difference` (on all N rows), `lo`, `hi` (nan when no resample held both classes)
    and `resamples_used`.
    """
    labels, scores_a, scores_b = np.asarray(labels), np.asarray(scores_a), np.asarray(scores_b)
    values = [
        metric(labels[rows], scores_a[rows]) - metric(labels[rows], scores_b[rows])
        for rows in bootstrap_rows(labels, resamples, seed, groups)
    ]
    low, high = percentile_interval(values)
    return {
        "difference": float(metric(labels, scores_a) - metric(labels, scores_b)),
        "lo": float(low),
        "hi": float(high),
        "resamples_used": len(values),
    }


def compute_metrics(
    test: pd.DataFrame,
    val: pd.DataFrame | None,
    resamples: int = 1000,
    seed: int = 0,
    windows: pd.DataFrame | None = None,
    unit: str = "pair",
) -> dict:
    """Metrics of test predictions (columns pair_id, label, score); the threshold comes from `val`.

    Intervals resample whole groups of `unit` (`dependence_groups`) among the test pairs, read from the cell
    line's `windows` table; without it, pairs. `bootstrap_unit` and `bootstrap_groups` say which and how many.
    """
    labels, scores = test["label"].to_numpy(int), test["score"].to_numpy(float)
    if windows is None:
        unit = "pair"
    groups = None if unit == "pair" else groups_of_pairs(windows, test["pair_id"], unit)
    metrics = {
        "n_test": int(len(labels)),
        "positives": int(labels.sum()),
        "negatives": int(len(labels) - labels.sum()),
        "auroc": float(roc_auc_score(labels, scores)),
        "auprc": float(average_precision_score(labels, scores)),
        "auroc_ci95": bootstrap_interval(labels, scores, roc_auc_score, resamples, seed, groups),
        "auprc_ci95": bootstrap_interval(labels, scores, average_precision_score, resamples, seed, groups),
        # The CRISPRi benchmark's two figures, by its own rules (EngreitzLab/CRISPR_comparison).
        "auprc_trapezoid": benchmark_auprc(labels, scores),
        "auprc_trapezoid_ci95": bootstrap_interval(labels, scores, benchmark_auprc, resamples, seed, groups),
        "precision_at_70_recall": precision_at_recall(labels, scores, 0.7),
        "precision_at_70_recall_ci95": bootstrap_interval(
            labels, scores, lambda y, s: precision_at_recall(y, s, 0.7), resamples, seed, groups
        ),
        "prevalence": float(labels.mean()),
        "bootstrap_unit": unit,
        "bootstrap_groups": group_count(groups, len(labels)),
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
