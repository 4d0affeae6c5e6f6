"""Scoring a trained model's validation and test splits into `predictions.tsv` and `metrics.json`.

The file formats and every metric are `epiformer.evaluation.metrics`'; the baselines write the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from epiformer.constants import SCORED_SPLITS
from epiformer.data.shards import data_fields, load_split
from epiformer.evaluation.metrics import compute_metrics, write_predictions
from epiformer.inference.devices import select_device
from epiformer.inference.trained_model import load_trained_model, predict_split
from epiformer.io.files import atomic_write_text
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
) -> dict:
    """Score validation and test splits with a trained model; write predictions.tsv and metrics.json.

    Span models score batches of at most `max_tokens` model tokens (the workflow passes four
    times `train.max_tokens_per_batch`: scoring keeps no activations for a backward pass).
    `device`: cpu, cuda or auto (`inference.devices.select_device`; the workflow scores span
    models where they trained, element models on the CPU).
    """
    device = select_device(device)
    model, _ = load_trained_model(model_dir, device)
    frames = {}
    for split in SCORED_SPLITS:
        scores, labels, ids = predict_split(model, load_split(shard_dir, split), SCORING_BATCH_SIZE, device, max_tokens)
        frames[split] = pd.DataFrame({"pair_id": ids, "label": labels, "score": scores})
    metrics = {**compute_metrics(frames["test"], frames["val"], resamples, seed), **data_fields(shard_dir)}
    write_predictions(frames["test"], predictions_path)
    atomic_write_text(Path(metrics_path), json.dumps(metrics, indent=2))
    return metrics
