"""Replicates (`train.replicates`): one model trained N times on the same split with seeds seed, seed + 1, ...

Each replicate is its own training job (a cluster runs them at once; each resumes on its own)
in `{model folder}/replicates/{1..N}/`, a model folder like any other. The model folder itself
then holds only `model.json`, the ensemble's description written here from the replicates':
what they share (model, windows, split, data manifest), `replicates` (their folders,
relative), `seeds`, and the cost of the ensemble as scored (parameters and training seconds
summed over the replicates, peak memory their largest, throughput and epochs their median and
mean). `inference.trained_model` loads it as their mean probability.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from epiformer.io.model_description import description_path, read_description, write_description

SHARED_KEYS = ("model", "windows", "flank", "split", "trained_on", "data_manifest_sha256")


class ReplicateError(ValueError):
    """Replicates that are not one model trained on one split."""


def replicate_names(count: int) -> list[str]:
    """The replicate folders' names, relative to the model folder: `replicates/1` ... (none for a single model)."""
    return [f"replicates/{replicate}" for replicate in range(1, count + 1)] if count > 1 else []


def ensemble_description(model_dir: str | Path, names: list[str]) -> dict:
    """The ensemble's model.json (module docstring) from the replicates' own, which must share SHARED_KEYS."""
    model_dir = Path(model_dir)
    descriptions = [read_description(model_dir / name) for name in names]
    first = descriptions[0]
    for name, description in zip(names[1:], descriptions[1:]):
        differ = [key for key in SHARED_KEYS if description.get(key) != first.get(key)]
        if _recipe(description) != _recipe(first):
            differ.append("train (other than the seed)")
        if differ:
            raise ReplicateError(
                f"{description_path(model_dir / name)} differs from {description_path(model_dir / names[0])} in "
                f"{', '.join(differ)}: replicates must be one model trained on the same data. Re-run their training."
            )
    return {
        **{key: first.get(key) for key in SHARED_KEYS},
        "replicates": names,
        "seeds": [description["train"]["seed"] for description in descriptions],
        "train": {**first["train"], "seed": None, "replicates": len(names)},
        "parameters": int(sum(description["parameters"] for description in descriptions)),
        "best_epoch": [description["best_epoch"] for description in descriptions],
        "best_val_auprc": [description["best_val_auprc"] for description in descriptions],
        "train_seconds": float(sum(description["train_seconds"] for description in descriptions)),
        "tokens_per_s": float(np.median([description["tokens_per_s"] for description in descriptions])),
        "epochs_trained": float(np.mean([description["epochs_trained"] for description in descriptions])),
        "time_budget_reached": any(description["time_budget_reached"] for description in descriptions),
        "device": first["device"],
        "peak_memory_mb": float(max(description["peak_memory_mb"] for description in descriptions)),
        "versions": first.get("versions"),
    }


def _recipe(description: dict) -> dict:
    """What a replicate was trained with, less what differs between replicates by design (the seed)."""
    return {key: value for key, value in description["train"].items() if key not in ("seed", "replicates")}


def write_ensemble_description(model_dir: str | Path, names: list[str]) -> dict:
    """`ensemble_description`, written atomically to `{model_dir}/model.json`."""
    description = ensemble_description(model_dir, names)
    write_description(model_dir, description)
    return description
