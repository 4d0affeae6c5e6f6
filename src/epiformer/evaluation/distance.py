"""Evaluation that sees through distance: metrics within distance bins and a distance-matched AUROC.

Genomic distance alone separates interacting pairs from the rest on every real benchmark, and
a span's length is its distance, so one AUROC over all distances cannot tell a model that
reads sequence from one that measures length. Both measures here compare pairs of similar
distance only:

- **Distance bins**: the test set's distance quantiles (`evaluate.distance_bins`, e.g. 5
  quintiles); AUROC and AUPRC within each bin that holds both classes.
- **Distance-matched AUROC**: each positive against the negatives of its own distance stratum
  (`evaluate.distance_strata` quantiles): the fraction of (positive, negative) pairs of the
  same stratum that the model ranks right, ties counting half, over all strata together
  (a stratified Mann-Whitney statistic). A score of distance alone is close to 0.5 here; a
  model whose matched AUROC is no better than the distance baseline's has learned distance.

Distances are windows.tsv's (centre to centre; the same for every model and baseline of a
cell line, whatever it reads). Bin edges come from the cell line's test pairs, so every
model and baseline is cut at the same distances. Pairs across chromosomes (distance -1) form
their own bin and stratum, `across chromosomes`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from epiformer.evaluation.metrics import (
    bootstrap_interval,
    fast_average_precision,
    fast_roc_auc,
    paired_bootstrap_difference,
)

ACROSS_CHROMOSOMES = "across chromosomes"
BIN_COLUMNS = ["bin", "distance_low", "distance_high", "n_test", "positives", "auroc", "auprc"]


def quantile_edges(distances: np.ndarray, bins: int) -> np.ndarray:
    """Edges of `bins` quantile bins of the cis distances (repeated quantiles merged, so ties never split a bin;
    one distinct distance makes one bin, [d, d])."""
    cis = distances[distances >= 0]
    if len(cis) == 0:
        return np.array([], dtype=np.int64)
    edges = np.unique(np.quantile(cis, np.linspace(0, 1, bins + 1), method="lower").astype(np.int64))
    return np.repeat(edges, 2) if len(edges) == 1 else edges


def bin_of(distances: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Each pair's bin: 0 .. len(edges) - 2 by distance (the last bin holds its upper edge), -1 across chromosomes."""
    inner = edges[1:-1]
    bins = np.searchsorted(inner, distances, side="right")
    return np.where(distances < 0, -1, bins)


def bin_label(index: int, edges: np.ndarray) -> str:
    if index < 0:
        return ACROSS_CHROMOSOMES
    return f"{_kb(edges[index])}-{_kb(edges[index + 1])} kb"


def _kb(bases: int) -> str:
    """Three significant digits, never an exponent: 3.46, 412, 1900."""
    return np.format_float_positional(bases / 1000, precision=3, unique=False, fractional=False, trim="-")


def binned_metrics(labels: np.ndarray, scores: np.ndarray, distances: np.ndarray, bins: int) -> pd.DataFrame:
    """BIN_COLUMNS for each distance bin of these test pairs (AUROC and AUPRC NaN where a bin lacks a class)."""
    edges = quantile_edges(distances, bins)
    index = bin_of(distances, edges)
    rows = []
    for position in sorted(set(index.tolist()), key=lambda value: (value < 0, value)):
        here = index == position
        both_classes = 0 < labels[here].sum() < here.sum()
        rows.append(
            {
                "bin": bin_label(position, edges),
                "distance_low": -1 if position < 0 else int(edges[position]),
                "distance_high": -1 if position < 0 else int(edges[position + 1]),
                "n_test": int(here.sum()),
                "positives": int(labels[here].sum()),
                "auroc": fast_roc_auc(labels[here], scores[here]) if both_classes else np.nan,
                "auprc": fast_average_precision(labels[here], scores[here]) if both_classes else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=BIN_COLUMNS)


def distance_strata(distances: np.ndarray, strata: int) -> np.ndarray:
    """Each pair's matching stratum: its bin among `strata` quantile bins of these distances."""
    return bin_of(distances, quantile_edges(distances, strata))


def matched_auroc(labels: np.ndarray, scores: np.ndarray, strata: np.ndarray) -> float:
    """AUROC over (positive, negative) pairs of the same stratum only (module docstring); NaN if no stratum has both."""
    right, compared = 0.0, 0
    for stratum in np.unique(strata):
        here = strata == stratum
        positives = int(labels[here].sum())
        negatives = int(here.sum()) - positives
        if positives and negatives:
            right += fast_roc_auc(labels[here], scores[here]) * positives * negatives
            compared += positives * negatives
    return right / compared if compared else np.nan


def _matched(labels: np.ndarray, scored: np.ndarray) -> float:
    """matched_auroc of [N, 2] (score, stratum) rows: the form the bootstraps of `metrics` draw rows of."""
    return matched_auroc(labels, scored[:, 0], scored[:, 1])


def matched_auroc_with_interval(
    labels: np.ndarray, scores: np.ndarray, strata: np.ndarray, resamples: int, seed: int, groups=None
) -> tuple[float, float, float]:
    """The matched AUROC and its percentile 95% bootstrap interval (the draws of `metrics.bootstrap_rows`,
    whole `groups` where given)."""
    low, high = bootstrap_interval(labels, np.column_stack([scores, strata]), _matched, resamples, seed, groups)
    return matched_auroc(labels, scores, strata), low, high


def paired_matched_difference(
    labels: np.ndarray,
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    strata: np.ndarray,
    resamples: int,
    seed: int,
    groups=None,
) -> tuple[float, float, float]:
    """Matched AUROC of a minus b on the same pairs, with a paired percentile 95% bootstrap interval."""
    a, b = np.column_stack([scores_a, strata]), np.column_stack([scores_b, strata])
    paired = paired_bootstrap_difference(labels, a, b, _matched, resamples, seed, groups)
    return paired["difference"], paired["lo"], paired["hi"]


REFERENCE = "distance"  # the baseline every matched AUROC is compared with, when the results hold it
MATCHED_COLUMNS = [
    "matched_auroc",
    "matched_auroc_lo",
    "matched_auroc_hi",
    f"matched_auroc_diff_{REFERENCE}",
    f"matched_auroc_diff_{REFERENCE}_lo",
    f"matched_auroc_diff_{REFERENCE}_hi",
    "binned_auroc_mean",
    "binned_auprc_mean",
]


def distance_evaluation(
    frames: dict[tuple[str, str], pd.DataFrame], bins: int, strata: int, resamples: int, seed: int
) -> tuple[dict[tuple[str, str], dict], pd.DataFrame]:
    """The within-distance measures of every (cell line, model or baseline), and the long table of their bins.

    `frames`: (cell line, name) -> its test predictions with windows.tsv's distance (pair_id,
    label, score, distance, and `group` where the intervals resample groups of pairs). Returns
    MATCHED_COLUMNS for each key (the difference with the
    `distance` baseline of the same cell line, paired on the same bootstrap draws; NaN for the
    baseline itself or without one) and the rows of `distance_bins.tsv`: cell_line, model and
    BIN_COLUMNS.
    """
    columns, tables = {}, []
    for (cell, name), frame in frames.items():
        labels, scores = frame["label"].to_numpy(int), frame["score"].to_numpy(float)
        distances = frame["distance"].to_numpy(np.int64)
        table = binned_metrics(labels, scores, distances, bins)
        tables.append(table.assign(cell_line=cell, model=name))
        stratum = distance_strata(distances, strata)
        groups = frame["group"].to_numpy() if "group" in frame else None
        matched = matched_auroc_with_interval(labels, scores, stratum, resamples, seed, groups)
        difference = (np.nan, np.nan, np.nan)
        reference = frames.get((cell, REFERENCE))
        if reference is not None and name != REFERENCE:
            paired = frame[["pair_id"]].merge(reference[["pair_id", "score"]], on="pair_id", how="left")
            if paired["score"].notna().all():  # the same test pairs (paired_predictions has checked by now)
                difference = paired_matched_difference(
                    labels, scores, paired["score"].to_numpy(float), stratum, resamples, seed, groups
                )
        columns[(cell, name)] = dict(
            zip(MATCHED_COLUMNS, (*matched, *difference, table["auroc"].mean(), table["auprc"].mean()))
        )
    bins_table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=BIN_COLUMNS)
    return columns, bins_table[["cell_line", "model", *BIN_COLUMNS]] if tables else bins_table


def with_distances(predictions: pd.DataFrame, windows: pd.DataFrame, where: str) -> pd.DataFrame:
    """`predictions` with each test pair's windows.tsv distance; fails naming `where` when a pair is not there."""
    merged = predictions.merge(windows[["pair_id", "distance"]], on="pair_id", how="left")
    if merged["distance"].isna().any():
        missing = merged.loc[merged["distance"].isna(), "pair_id"]
        raise ValueError(
            f"{where}: pair_id {missing.iloc[0]} ({len(missing)} in all) is not in the cell line's windows.tsv; "
            "the predictions come from another run of the windows stage: re-run evaluate."
        )
    return merged.astype({"distance": np.int64})
