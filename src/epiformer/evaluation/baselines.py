"""Baselines scored on the Transformers' own test pairs: genomic distance, k-mer content, element propensity.

Each baseline is a logistic regression fitted on the train split (features standardised,
L2 penalty, inverse strength C; for `kmer`, C is chosen from `C_GRIDS` by validation AUPRC,
the criterion that picks the Transformers' best epoch). Its decision threshold is picked
on the validation split by `metrics.compute_metrics`, and it is reported on the test
split. Outputs have the formats of `epiformer.evaluation.metrics` (`predictions.tsv`: pair_id,
label, score; `metrics.json`), and `metrics.json` gains a `baseline` entry that says what
was fitted. predictions.tsv holds each score exactly (`constants.SCORE_FORMAT`), so the
metrics equal a recomputation from it.

The pairs of each split, in order, are the shards' (`shards.load_split`), so a baseline is
scored on exactly the pairs a Transformer is; `windows.tsv` supplies distances and element
coordinates by pair_id, and the `kmer` sequences are the shards' centred windows (the
stored flank is cropped off, as for validation and test batches), never a re-extraction.

- `distance`: log10(distance + 1), distance in bp between window centres, plus an
  indicator for pairs across chromosomes (distance -1 in windows.tsv). The score is
  monotone in distance.
- `kmer`: frequencies of canonical k-mers (a k-mer and its reverse complement count as one,
  as enhancers act in either orientation; k-mers touching an N are skipped) in the enhancer
  window and in the promoter window: float32 [N, 2 * n_canonical(k)], standardised.
- `distance_kmer`: both of the above in one regression (`kmer`'s columns, then the two of
  `distance`), C chosen as for `kmer`: the baseline that reads what a model with distance
  reads, so that such a model's gain over it is the gain of reading sequence as a model does.
- `propensity`: each element's positive rate among training pairs, elements identified by
  their window (chrom, start, end), smoothed towards the training prevalence with
  `pseudo_pairs` pseudo-pairs; an element absent from training gets the prevalence. The
  two logit rates are the features. Training pairs use leave-one-out rates (their own
  label left out), otherwise the fit would trust rates no test pair can have. Under a
  chromosome split no test element occurs in training, so every test pair gets the same
  score and AUROC is 0.5: that is the point of this baseline.

Beside pooled models, `run_pooled_baseline` fits each baseline once on every cell line's train
split (C chosen on all their validation pairs) and scores each cell line as `run_baseline` does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from epiformer import __version__
from epiformer.constants import BASELINES, ELEMENTS, SCORED_SPLITS, SPLITS
from epiformer.data.shards import ShardError, ShardSet, data_fields, load_split
from epiformer.evaluation.metrics import compute_metrics
from epiformer.io.files import read_windows
from epiformer.io.metrics_file import write_metrics
from epiformer.io.predictions import write_predictions
from epiformer.sequence.onehot import crop, unpack

log = logging.getLogger(__name__)

# With one or two features and thousands of pairs the penalty hardly matters, and a strong
# one only squeezes the scores together; k-mers need tuning.
KMER_C_GRID = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
C_GRIDS = {"distance": (1.0,), "kmer": KMER_C_GRID, "distance_kmer": KMER_C_GRID, "propensity": (1.0,)}
N_CODE = 4  # base code of N (A, C, G, T are 0-3)


def split_tables(
    windows: pd.DataFrame, shards: dict[str, ShardSet], windows_path="windows.tsv"
) -> dict[str, pd.DataFrame]:
    """The windows.tsv rows of each split's pairs, in shard order; fails when the two disagree."""
    by_id = windows.set_index("pair_id")
    tables = {}
    for split, shard_set in shards.items():
        missing = np.setdiff1d(shard_set.pair_id, by_id.index.to_numpy())
        if len(missing):
            raise ShardError(
                f"{windows_path}: pair_id {missing[0]} of the {split} shards is missing ({len(missing)} "
                "in all); the shards come from another windows.tsv: re-run encode."
            )
        table = by_id.loc[shard_set.pair_id].reset_index()
        disagree = (table["label"].to_numpy() != shard_set.label) | (table["split"].to_numpy() != split)
        if disagree.any():
            first = table["pair_id"].iloc[int(np.argmax(disagree))]
            raise ShardError(
                f"{windows_path}: pair_id {first} has another label or split than in the shards "
                f"({int(disagree.sum())} pairs); re-run encode."
            )
        tables[split] = table
    return tables


def distance_features(table: pd.DataFrame) -> np.ndarray:
    """float64 [N, 2]: log10(distance + 1) (0 for pairs across chromosomes), across-chromosome indicator."""
    distance = table["distance"].to_numpy(dtype=float)
    trans = distance < 0
    return np.column_stack([np.where(trans, 0.0, np.log10(np.maximum(distance, 0) + 1)), trans.astype(float)])


def canonical_kmer_columns(k: int) -> tuple[np.ndarray, int]:
    """Column of every k-mer code (base-4, first base most significant) among the canonical k-mers, and their count."""
    codes = np.arange(4**k)
    digits = (codes[:, None] // 4 ** np.arange(k - 1, -1, -1)[None, :]) % 4  # (4^k, k), first base first
    reverse_complement = ((3 - digits[:, ::-1]) * 4 ** np.arange(k - 1, -1, -1)[None, :]).sum(axis=1)
    canonical, columns = np.unique(np.minimum(codes, reverse_complement), return_inverse=True)
    return columns, len(canonical)


def base_codes(onehot: np.ndarray) -> np.ndarray:
    """uint8 [B, W, 4] one-hot (channels A, C, G, T) -> int64 [B, W] codes 0-3, N_CODE where all channels are 0."""
    return np.where(onehot.any(axis=2), onehot.argmax(axis=2), N_CODE).astype(np.int64)


def kmer_frequencies(codes: np.ndarray, k: int) -> np.ndarray:
    """int [B, W] base codes -> float32 [B, n_canonical(k)]: canonical k-mer counts over the window's valid k-mers."""
    columns, n_columns = canonical_kmer_columns(k)
    rows, width = codes.shape
    positions = width - k + 1
    kmer = np.zeros((rows, positions), dtype=np.int64)
    valid = np.ones((rows, positions), dtype=bool)
    for offset in range(k):
        base = codes[:, offset : offset + positions]
        valid &= base != N_CODE
        kmer = kmer * 4 + np.minimum(base, 3)
    flat = (np.arange(rows)[:, None] * n_columns + columns[kmer])[valid]
    counts = np.bincount(flat, minlength=rows * n_columns).reshape(rows, n_columns).astype(np.float32)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)


def kmer_features(shards: ShardSet, k: int, chunk: int = 1024) -> np.ndarray:
    """float32 [N, 2 * n_canonical(k)]: enhancer then promoter k-mer frequencies of the centred windows."""
    parts = []
    for start in range(0, len(shards), chunk):
        rows = np.arange(start, min(start + chunk, len(shards)))
        per_element = []
        for element in ELEMENTS:
            onehot = unpack(shards.packed(element, rows), shards.lengths[element])  # (B, L, 4)
            centred = crop(onehot, shards.flank, np.zeros(len(rows), dtype=int))  # (B, W, 4)
            per_element.append(kmer_frequencies(base_codes(centred), k))
        parts.append(np.hstack(per_element))
    return np.vstack(parts)


def element_keys(table: pd.DataFrame, element: str) -> pd.Series:
    """`chrom:start-end` of each pair's `element` window: one key per distinct element."""
    start, end = table[f"{element}_start"].astype(str), table[f"{element}_end"].astype(str)
    return table[f"{element}_chrom"] + ":" + start + "-" + end


def propensity_features(tables: dict[str, pd.DataFrame], pseudo_pairs: float) -> tuple[dict[str, np.ndarray], dict]:
    """float64 [N, 2] logit smoothed positive rates of each pair's enhancer and promoter (see module docstring)."""
    if pseudo_pairs <= 0:
        raise ValueError(f"baselines.pseudo_pairs must be > 0 (got {pseudo_pairs}): it keeps every rate inside (0, 1).")
    train = tables["train"]
    prior = float(train["label"].mean())
    features, seen = {split: [] for split in tables}, {}
    for element in ELEMENTS:
        keys = element_keys(train, element)
        counts = train.groupby(keys)["label"].agg(["sum", "size"])
        for split, table in tables.items():
            here = counts.reindex(element_keys(table, element))
            positives, pairs = here["sum"].fillna(0).to_numpy(), here["size"].fillna(0).to_numpy()
            if split == "train":  # leave the pair's own label out
                positives, pairs = positives - table["label"].to_numpy(), pairs - 1
            rate = (positives + pseudo_pairs * prior) / (pairs + pseudo_pairs)
            features[split].append(np.log(rate / (1 - rate)))
    seen = seen_in_training(train, tables["test"])
    return {split: np.column_stack(parts) for split, parts in features.items()}, {"prior": prior, **seen}


def seen_in_training(train: pd.DataFrame, test: pd.DataFrame) -> dict[str, float]:
    """test_enhancers_seen_in_training and test_promoters_seen_in_training: the fraction of the test pairs whose
    element (its window) also lies in a training pair."""
    return {
        f"test_{element}s_seen_in_training": float(
            element_keys(test, element).isin(element_keys(train, element)).mean()
        )
        for element in ELEMENTS
    }


def fit_logistic(
    features: dict[str, np.ndarray], labels: dict[str, np.ndarray], c_grid: tuple[float, ...], seed: int = 0
) -> tuple[dict[str, np.ndarray], float]:
    """Standardised L2 logistic regression fitted on train for each C; the C with the best
    validation AUPRC (the smallest on ties) scores every split. Returns rounded scores by split,
    and C."""
    best = None
    for c in c_grid:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000, random_state=seed))
        model.fit(features["train"], labels["train"])
        val_auprc = average_precision_score(labels["val"], model.predict_proba(features["val"])[:, 1])
        log.info("C=%g: validation AUPRC %.4f", c, val_auprc)
        if best is None or val_auprc > best[0]:
            best = (val_auprc, c, model)
    _, c, model = best
    return {split: model.predict_proba(x)[:, 1] for split, x in features.items()}, c


def baseline_features(
    name: str, tables: dict[str, pd.DataFrame], shards: dict[str, ShardSet], kmer_size: int, pseudo_pairs: float
) -> tuple[dict[str, np.ndarray], dict]:
    """Feature matrices by split, and what describes them, for one baseline."""
    if name == "distance":
        return {split: distance_features(table) for split, table in tables.items()}, {}
    if name in ("kmer", "distance_kmer"):
        if not 1 <= kmer_size <= 8:
            raise ValueError(f"baselines.kmer_size must be 1-8 (got {kmer_size}); 8 already gives 65,568 features.")
        features = {split: kmer_features(shard_set, kmer_size) for split, shard_set in shards.items()}
        if name == "distance_kmer":
            features = {split: np.hstack([x, distance_features(tables[split])]) for split, x in features.items()}
        return features, {"kmer_size": kmer_size}
    if name == "propensity":
        features, description = propensity_features(tables, pseudo_pairs)
        return features, {"pseudo_pairs": pseudo_pairs, **description}
    raise ValueError(f"Unknown baseline {name!r}: choose one of {', '.join(BASELINES)}.")


@dataclass
class CellPairs:
    """One cell line's pairs as a baseline reads them: shards, windows.tsv rows and labels by split."""

    shard_dir: Path
    windows: pd.DataFrame
    shards: dict[str, ShardSet]
    tables: dict[str, pd.DataFrame]
    labels: dict[str, np.ndarray]

    @classmethod
    def load(cls, windows_path, shard_dir) -> CellPairs:
        shards = {split: load_split(shard_dir, split) for split in SPLITS}
        windows = read_windows(windows_path)
        tables = split_tables(windows, shards, windows_path)
        labels = {split: shard_set.label.astype(int) for split, shard_set in shards.items()}
        return cls(Path(shard_dir), windows, shards, tables, labels)


def run_baseline(
    name: str,
    windows_path,
    shard_dir,
    predictions_path,
    metrics_path,
    kmer_size: int = 5,
    pseudo_pairs: float = 1.0,
    resamples: int = 1000,
    seed: int = 0,
    bootstrap_unit: str = "pair",
) -> dict:
    """Fit one baseline on train, choose C and the threshold on val, score test; write predictions.tsv
    and metrics.json (see module docstring); intervals resample whole groups of `bootstrap_unit`
    (`metrics.dependence_groups`)."""
    check_name(name)
    cell = CellPairs.load(windows_path, shard_dir)
    features, description = baseline_features(name, cell.tables, cell.shards, kmer_size, pseudo_pairs)
    scores, c = fit_logistic(features, cell.labels, C_GRIDS[name], seed)
    fitted = {"name": name, "features": int(features["train"].shape[1]), "C": c, "seed": seed}
    fitted |= {"train_pairs": len(cell.tables["train"]), **description}
    return write_scored(cell, scores, fitted, predictions_path, metrics_path, resamples, seed, bootstrap_unit)


def run_pooled_baseline(
    name: str,
    windows_paths: list,
    shard_dirs: list,
    predictions_paths: list,
    metrics_paths: list,
    kmer_size: int = 5,
    pseudo_pairs: float = 1.0,
    resamples: int = 1000,
    seed: int = 0,
    bootstrap_unit: str = "pair",
) -> list[dict]:
    """One baseline fitted on every cell line's train split at once (C chosen on all their validation pairs, as a
    pooled model is selected), then scored on each cell line as `run_baseline` scores one (its own validation
    pairs pick its threshold): the i-th cell line's files at predictions_paths[i] and metrics_paths[i]; their
    metrics, in that order. For `propensity`, an element's rate counts its pairs in every cell line."""
    check_name(name)
    if not len(windows_paths) == len(shard_dirs) == len(predictions_paths) == len(metrics_paths) > 0:
        raise ValueError("run_pooled_baseline: give one windows.tsv, shard folder and pair of outputs a cell line.")
    cells = [CellPairs.load(windows, shards) for windows, shards in zip(windows_paths, shard_dirs)]
    features, description = pooled_features(name, cells, kmer_size, pseudo_pairs)
    labels = {split: np.concatenate([cell.labels[split] for cell in cells]) for split in SPLITS}
    scores, c = fit_logistic(features, labels, C_GRIDS[name], seed)
    fitted = {"name": name, "features": int(features["train"].shape[1]), "C": c, "seed": seed, "pooled": True}
    fitted |= {"cell_lines": len(cells), "train_pairs": len(labels["train"]), **description}
    if name == "propensity":  # each cell line's own test elements against every cell line's training pairs
        train = pd.concat([cell.tables["train"] for cell in cells], ignore_index=True)
        described = [{**fitted, **seen_in_training(train, cell.tables["test"])} for cell in cells]
    else:
        described = [fitted] * len(cells)
    return [
        write_scored(cell, cell_scores, cell_fitted, predictions, metrics, resamples, seed, bootstrap_unit)
        for cell, cell_scores, cell_fitted, predictions, metrics in zip(
            cells, split_by_cell(scores, cells), described, predictions_paths, metrics_paths
        )
    ]


def check_name(name: str) -> None:
    if name not in BASELINES:
        raise ValueError(f"Unknown baseline {name!r}: choose one of {', '.join(BASELINES)}.")


def pooled_features(
    name: str, cells: list[CellPairs], kmer_size: int, pseudo_pairs: float
) -> tuple[dict[str, np.ndarray], dict]:
    """`baseline_features` of every cell line's pairs, stacked in cell-line order by split. Propensity rates are
    counted over the stacked tables (an element's pairs in every cell line); the other features are a pair's own."""
    if name == "propensity":
        tables = {split: pd.concat([cell.tables[split] for cell in cells], ignore_index=True) for split in SPLITS}
        return baseline_features(name, tables, {}, kmer_size, pseudo_pairs)
    per_cell = [baseline_features(name, cell.tables, cell.shards, kmer_size, pseudo_pairs) for cell in cells]
    features = {split: np.vstack([cell_features[split] for cell_features, _ in per_cell]) for split in SPLITS}
    return features, per_cell[0][1]


def split_by_cell(scores: dict[str, np.ndarray], cells: list[CellPairs]) -> list[dict[str, np.ndarray]]:
    """Stacked scores by split (`pooled_features`' order) -> each cell line's scores by split."""
    ends = {split: np.cumsum([len(cell.labels[split]) for cell in cells]) for split in scores}
    return [
        {split: scores[split][(ends[split][index - 1] if index else 0) : ends[split][index]] for split in scores}
        for index in range(len(cells))
    ]


def write_scored(
    cell: CellPairs, scores, fitted: dict, predictions_path, metrics_path, resamples, seed, bootstrap_unit
) -> dict:
    """Score a cell line's validation and test pairs (threshold on val), write its predictions.tsv and metrics.json
    (what was fitted under `baseline`), and return the metrics."""
    frames = {
        split: pd.DataFrame(
            {"pair_id": cell.shards[split].pair_id, "label": cell.labels[split], "score": scores[split]}
        )
        for split in SCORED_SPLITS
    }
    metrics = compute_metrics(frames["test"], frames["val"], resamples, seed, cell.windows, bootstrap_unit)
    metrics = {**metrics, **data_fields(cell.shard_dir)}
    metrics["baseline"] = {**fitted, "epiformer_version": __version__}
    write_predictions(frames["test"], predictions_path)
    write_metrics(metrics_path, metrics)
    return metrics
