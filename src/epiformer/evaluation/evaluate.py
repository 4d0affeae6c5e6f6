"""Scoring a trained model's validation and test splits into `predictions.tsv` and `metrics.json`.

The validation split is scored on its own (`score_validation`: training's own scores where it
kept them, `training_validation`), into `validation_predictions.tsv`: the run's model choice
(`evaluation.selection`) reads those files and nothing of the test split. `evaluate_model`
scores the test split, taking the threshold from that file.

The file formats and every metric are `epiformer.evaluation.metrics`'; the baselines write the same.
An ensemble (`train.replicates` > 1) is scored replicate by replicate: each replicate's test
predictions go to `replicates/{r}/predictions.tsv` beside the ensemble's predictions.tsv (for a
pooled model, in the cell line's folder), the ensemble's scores are the mean of
the replicates' probabilities (validation and test), and metrics.json gains `replicates`
(each one's seed, AUROC and AUPRC on the test split) and their mean and standard deviation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.constants import SCORED_SPLITS, VAL_PREDICTIONS
from epiformer.data.shards import data_fields, load_split, manifest_checksum, shard_manifest
from epiformer.evaluation.metrics import compute_metrics
from epiformer.inference.devices import labelled_device_type, select_device
from epiformer.inference.trained_model import load_trained_model, predict_split, read_model_description
from epiformer.io.files import sha256_file
from epiformer.io.metrics_file import write_metrics
from epiformer.io.model_description import description_path, read_description
from epiformer.io.predictions import read_predictions, write_predictions
from epiformer.model.configs import SCORING_BATCH_SIZE, SCORING_TOKENS


def evaluate_model(
    model_dir: str | Path,
    shard_dir: str | Path,
    predictions_path,
    metrics_path,
    resamples: int = 1000,
    seed: int = 0,
    max_tokens: int = SCORING_TOKENS,
    device: str = "cpu",
    replicate_predictions: list | None = None,
    windows=None,
    bootstrap_unit: str = "pair",
    validation_predictions=None,
) -> dict:
    """Score a trained model or ensemble on the test split; write predictions.tsv and metrics.json.

    The threshold comes from `validation_predictions` (what `score_validation` wrote); without
    it the validation split is scored here too.

    For an ensemble, `replicate_predictions` are where each replicate's test predictions go, in
    the order of its model.json's `replicates` (the rule's declared outputs; default:
    `{name}/predictions.tsv` beside predictions.tsv).

    Span models score batches of at most `max_tokens` model tokens (the workflow passes four
    times `train.max_tokens_per_batch`: scoring keeps no activations for a backward pass).
    `device`: cpu, cuda or auto (`inference.devices.select_device`; the workflow scores span
    models where they trained, element models on the CPU). Intervals resample whole groups of
    `bootstrap_unit` among the test pairs (`metrics.dependence_groups`), from the cell line's
    `windows` (windows.tsv); without it, pairs.
    """
    model_dir, device = Path(model_dir), select_device(device)
    wanted = SCORED_SPLITS if validation_predictions is None else ("test",)
    frames, replicates = score_model(model_dir, shard_dir, wanted, device, max_tokens)
    if validation_predictions is not None:
        frames["val"] = read_predictions(validation_predictions)
    table = None if windows is None else pd.read_csv(windows, sep="\t")
    metrics = compute_metrics(frames["test"], frames["val"], resamples, seed, table, bootstrap_unit)
    metrics.update(data_fields(shard_dir))
    if replicates:
        names, tests = list(replicates), [replicate["test"] for replicate in replicates.values()]
        if replicate_predictions is None:
            replicate_predictions = [Path(predictions_path).parent / name / "predictions.tsv" for name in names]
        if len(replicate_predictions) != len(names):
            raise ValueError(
                f"{description_path(model_dir)} names {len(names)} replicates, but {len(replicate_predictions)} "
                "replicate predictions files were asked for: train.replicates changed since it was written; re-run."
            )
        metrics.update(replicate_metrics(model_dir, names, tests, replicate_predictions))
    write_predictions(frames["test"], predictions_path)
    write_metrics(metrics_path, metrics)
    return metrics


def score_validation(model_dir, shard_dir, path, max_tokens: int = SCORING_TOKENS, device: str = "cpu") -> pd.DataFrame:
    """Score a trained model or ensemble on the validation split alone; write its predictions to `path`.

    The test split is not loaded. A replicated model's scores are its replicates' mean probability,
    as on the test split.
    """
    frames, _ = score_model(Path(model_dir), shard_dir, ("val",), select_device(device), max_tokens)
    write_predictions(frames["val"], path)
    return frames["val"]


def score_model(model_dir: Path, shard_dir, wanted, device, max_tokens: int) -> tuple[dict, dict]:
    """A model's or ensemble's predictions on each `wanted` split, and each replicate's own by its folder name, in
    model.json's order (none if unreplicated)."""
    splits = {split: load_split(shard_dir, split) for split in wanted}
    names = read_model_description(model_dir).get("replicates", [])
    scored = {name: score_splits(model_dir / name, splits, shard_dir, device, max_tokens) for name in names}
    if scored:
        frames = {split: mean_probability([replicate[split] for replicate in scored.values()]) for split in wanted}
        return frames, scored
    return score_splits(model_dir, splits, shard_dir, device, max_tokens), scored


def score_splits(model_dir: Path, splits: dict, shard_dir, device, max_tokens: int) -> dict[str, pd.DataFrame]:
    """One model's predictions (pair_id, label, score) on each scored split (validation: training's, if kept)."""
    model, description = load_trained_model(model_dir, device)
    frames = {}
    for split, data in splits.items():
        kept = training_validation(model_dir, description, shard_dir, data, device) if split == "val" else None
        if kept is not None:
            frames[split] = kept
            continue
        scores, labels, ids = predict_split(model, data, SCORING_BATCH_SIZE, device, max_tokens)
        # float64, exactly the float32 scores: the file then holds the values the threshold was chosen on.
        frames[split] = pd.DataFrame({"pair_id": ids, "label": labels, "score": scores.astype(np.float64)})
    return frames


def training_validation(model_dir: Path, description: dict, shard_dir, data, device) -> pd.DataFrame | None:
    """The validation scores training wrote for its best epoch (VAL_PREDICTIONS), in the split's row order;
    None when they cannot stand for scoring the split again here.

    They are the kept weights' scores on these validation pairs: scoring the split again would
    repeat training's last validation pass (for softmax on the long demo's spans, five minutes).
    The model's `description` (its model.json, read once with the weights) holds the file's
    checksum, so a file left by another training is not used. They stand in only for the shards
    they were made on (a pooled model's validation, or a transfer to another cell line's shards,
    is scored anew) and on the kind of device that made them (training on a GPU scores in
    bfloat16, the CPU in float32). Training scores in batches of
    its own size, so a score can differ from a fresh one in the last bits of float32 (on a GPU,
    in bfloat16's, by more).
    """
    path = model_dir / VAL_PREDICTIONS
    if not path.is_file() or description.get("val_predictions_sha256") != sha256_file(path):
        return None
    if labelled_device_type(str(description.get("device", ""))) != torch.device(device).type:
        return None
    if description.get("data_manifest_sha256") != manifest_checksum(shard_manifest(shard_dir)):
        return None
    kept = pd.read_csv(path, sep="\t").set_index("pair_id")
    ids = np.asarray(data.pair_id)
    if not kept.index.is_unique or len(kept) != len(ids) or set(kept.index) != set(ids.tolist()):
        return None
    return kept.loc[ids].reset_index()[["pair_id", "label", "score"]]


def mean_probability(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The ensemble's predictions: each pair's mean probability over the replicates (float64), same rows."""
    for frame in frames[1:]:
        if not np.array_equal(frame["pair_id"].to_numpy(), frames[0]["pair_id"].to_numpy()):
            raise ValueError("replicates scored different pairs; they must be scored on the same shards")
    scores = np.mean([frame["score"].to_numpy(np.float64) for frame in frames], axis=0)
    return frames[0][["pair_id", "label"]].assign(score=scores)


def replicate_metrics(model_dir: Path, names: list[str], tests: list[pd.DataFrame], paths: list) -> dict:
    """metrics.json's replicate entries; writes each replicate's test predictions to its path."""
    rows = []
    for name, test, path in zip(names, tests, paths):
        write_predictions(test, path)
        description = read_description(model_dir / name)
        labels, scores = test["label"].to_numpy(int), test["score"].to_numpy(float)
        rows.append(
            {
                "replicate": name,
                "seed": description["train"]["seed"],
                "auroc": float(roc_auc_score(labels, scores)),
                "auprc": float(average_precision_score(labels, scores)),
            }
        )
    summary = {}
    for metric in ("auroc", "auprc"):
        values = np.array([row[metric] for row in rows])
        summary[f"replicate_{metric}_mean"] = float(values.mean())
        summary[f"replicate_{metric}_sd"] = float(values.std(ddof=1))
    return {"replicates": rows, **summary}
