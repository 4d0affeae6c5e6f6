"""Inference: a trained model folder in, scores out, on the best device there is.

Evaluation, prediction and transfer use this module; none of them needs the training loop,
its data-parallel processes, signals or checkpoints.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import torch

from epiformer.batches import PairBatches, SpanBatches, batch_loader
from epiformer.model import EPITransformer, ModelConfig, score_batch
from epiformer.shards import SpanShardSet

log = logging.getLogger(__name__)


def select_device(name: str) -> torch.device:
    """`auto` picks CUDA when present and says loudly when it falls back to the CPU."""
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "train.device is 'cuda' but no CUDA GPU is visible. Use 'auto' or 'cpu', or run on a GPU node."
        )
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        log.warning("No CUDA GPU found: training on the CPU (train.device: auto). This is slow for real data sets.")
        return torch.device("cpu")
    return torch.device(name)


def mixed_precision(device: torch.device):
    """bf16 autocast on CUDA; float32 on the CPU, where bf16 matmuls run ~100x slower without bf16 units."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def load_trained_model(model_dir: str | Path, device: torch.device | str = "cpu") -> tuple[EPITransformer, dict]:
    """The model and its description from a `model.safetensors` + `model.json` directory."""
    from safetensors.torch import load_file

    model_dir = Path(model_dir)
    for name in ("model.json", "model.safetensors"):
        if not (model_dir / name).exists():
            raise FileNotFoundError(
                f"{model_dir / name} is missing: point at a trained results/<cell>/<model> "
                "(or results/pooled/<model>) folder."
            )
    description = json.loads((model_dir / "model.json").read_text())
    model = EPITransformer(ModelConfig(**description["model"]))
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.to(device).eval(), description


@torch.no_grad()
def predict_split(
    model, data, batch_size: int, device: torch.device, max_tokens: int = 65536
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Probabilities, labels and pair ids for a split, in the data's row order; centred windows, no augmentation.

    Window pairs go `batch_size` at a time; spans by length, within `max_tokens` model tokens a batch.
    """
    model.eval()
    if isinstance(data, SpanShardSet):
        batches = SpanBatches(data, max_tokens, model.config.patch_size)
    else:
        batches = PairBatches(data, batch_size)
    scores, labels, ids, rows = [], [], [], []
    for index, batch in enumerate(batch_loader(batches)):
        with mixed_precision(device):
            logits = score_batch(model, batch, device)
        scores.append(torch.sigmoid(logits.float()).cpu().numpy())
        labels.append(batch["label"].numpy())
        ids.append(batch["pair_id"].numpy())
        rows.append(batches.batches[index])
    order = np.argsort(np.concatenate(rows), kind="stable")  # span batches come in length order
    return (np.concatenate(scores)[order], np.concatenate(labels).astype(int)[order], np.concatenate(ids)[order])
