"""What a training run leaves in its output folder: `model.safetensors` (the best epoch's
weights), `train_log.tsv` (one row per epoch, `LOG_COLUMNS`), `model.json` (through
`io.model_description`: the model and training configs, the shards' window spec, the data
manifest's checksum, versions, cost) and, for a model of one cell line, `val_predictions.tsv`
(the best epoch's validation scores, which evaluation uses rather than score the split again).
Each is written atomically, the description last.
"""

from __future__ import annotations

import resource
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file

from epiformer.constants import VAL_PREDICTIONS
from epiformer.data.shards import manifest_checksum
from epiformer.io.files import atomic_write, atomic_write_text, sha256_file
from epiformer.io.model_description import write_description
from epiformer.io.predictions import write_predictions
from epiformer.io.provenance import package_versions
from epiformer.model.configs import DELTA_RULES
from epiformer.model.delta_rule import scan_kernel_name

LOG_COLUMNS = [
    "epoch",
    "train_loss",
    "val_loss",
    "val_auroc",
    "val_auprc",
    "learning_rate",
    "seconds",
    "tokens_per_s",
    "tokens",  # model tokens trained on in the epoch, all processes together (what train.max_tokens counts)
    "device",
    "epoch_fraction",  # below 1 only for an epoch that a budget (train.max_tokens or max_minutes) cut short
]


def keeps_validation(manifest: dict) -> bool:
    """Whether training keeps its validation scores (VAL_PREDICTIONS): for one cell line's shards only. A pooled
    model's validation spans every cell line, and evaluation scores each cell line's own split anew."""
    return manifest.get("sources") is None


def write_outputs(
    outdir: Path, best, history, model_config, train_config, manifest, device, budget_reached: bool = False
) -> dict:
    """Write model.safetensors (the best epoch's weights), train_log.tsv, model.json atomically; return model.json."""
    atomic_write(outdir / "model.safetensors", lambda temporary: save_file(best["weights"], str(temporary)))
    lines = ["\t".join(LOG_COLUMNS)] + ["\t".join(str(row[c]) for c in LOG_COLUMNS) for row in history]
    atomic_write_text(outdir / "train_log.tsv", "\n".join(lines) + "\n")
    kept_validation = None
    if keeps_validation(manifest):
        kept_validation = outdir / VAL_PREDICTIONS
        write_predictions(pd.DataFrame({k: v.numpy() for k, v in best["val_scores"].items()}), kept_validation)
    tokens = int(sum(row["tokens"] for row in history))
    description = {
        "model": model_config.to_dict(),
        "parameters": sum(v.numel() for v in best["weights"].values()),
        "windows": manifest["windows"],  # the shards' WindowSpec, unchanged: how `epiformer predict` places windows
        "flank": manifest["flank"],  # the most training shifted a window
        "split": manifest["split"],
        "trained_on": manifest.get("sources"),  # the shard folders of a pooled model; None for one cell line
        "train": asdict(train_config),
        "best_epoch": best["epoch"],
        "best_val_auprc": best["auprc"],
        "train_seconds": float(sum(r["seconds"] for r in history)),
        "tokens_per_s": float(np.median([r["tokens_per_s"] for r in history])),
        "epochs_trained": float(sum(r["epoch_fraction"] for r in history)),  # below `train.epochs` when stopped
        "tokens_trained": tokens,
        "token_budget_reached": bool(train_config.max_tokens) and tokens >= train_config.max_tokens,
        "time_budget_reached": budget_reached,
        "device": str(device),
        # The same config, seed and packages train another model on a CPU of another instruction set (its
        # kernels sum in another order): the scale demo's element-window model scored 0.672 and 0.582 so.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "delta_kernel": scan_kernel_name(torch.device(device)) if model_config.attention in DELTA_RULES else None,
        "peak_memory_mb": peak_memory_mb(),
        "data_manifest_sha256": manifest_checksum(manifest),
        # Ties the kept validation scores to these weights: evaluation ignores a file that does not match.
        "val_predictions_sha256": sha256_file(kept_validation) if kept_validation else None,
        "versions": package_versions(),
    }
    write_description(outdir, description)
    return description


def peak_memory_mb() -> float:
    """This process's peak: GPU memory allocated when training on CUDA, else resident memory (MiB)."""
    if torch.cuda.is_available() and torch.cuda.max_memory_allocated() > 0:
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
