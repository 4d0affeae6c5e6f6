"""A trained model folder in, scores out.

A model folder (`results/{cell}/{model}` or `results/pooled/{model}`) holds `model.json`
(the ModelConfig under `model`, the window settings under `windows`, training details) and
`model.safetensors` (the weights). An ensemble's folder (`train.replicates` > 1) holds
`model.json` only, naming its replicates' folders under `replicates` (relative to it), each a
model folder; it loads as one `model.ensemble.EnsembleModel`. Evaluation, prediction,
variants, attributions and transfer load it here; none of them needs the training loop, its
data-parallel processes, signals or checkpoints.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from epiformer.data.batches import batch_loader, model_batches
from epiformer.inference.devices import mixed_precision
from epiformer.io.model_description import (
    MODEL_JSON,
    ModelDescriptionError,
    description_path,
    read_description,
    read_description_if_any,
    reads_spans,
)
from epiformer.model.configs import SCORING_BATCH_SIZE, SCORING_TOKENS
from epiformer.model.delta_rule import KERNEL_VARIABLE, scan_kernel_name
from epiformer.model.ensemble import EnsembleModel
from epiformer.model.transformer import EPITransformer, ModelConfig, score_batch

log = logging.getLogger(__name__)

MODEL_FILES = (MODEL_JSON, "model.safetensors")
TrainedModel = EPITransformer | EnsembleModel  # what a model folder loads as: one model, or its replicates' ensemble


class ModelError(ValueError):
    """A model folder that is missing, incomplete, or not written by epiformer training."""


def read_model_description(model_dir: str | Path) -> dict:
    """`model.json` of a model folder, checked to hold a model and both window widths; ModelError says the fix."""
    model_dir = Path(model_dir)
    hint = (
        "Give a trained model folder, results/<cell>/<model> (or results/pooled/<model>), that holds "
        "model.json and model.safetensors."
    )
    if not model_dir.exists():
        raise ModelError(f"Model folder not found: {model_dir}. {hint}")
    if model_dir.is_file():
        raise ModelError(f"{model_dir} is a file, not a model folder. {hint} (Perhaps {model_dir.parent}?)")
    missing = [name for name in MODEL_FILES if not (model_dir / name).is_file()]
    if missing == ["model.safetensors"] and "replicates" in read_description_if_any(model_dir):
        missing = []  # an ensemble: its replicates hold the weights
    if missing:
        inside = sorted(path.parent.name for path in model_dir.glob(f"*/{MODEL_FILES[0]}"))
        fix = hint
        if inside:
            fix = f"It holds the model folder(s) {', '.join(inside)}: give one, e.g. --model {model_dir / inside[0]}."
        raise ModelError(f"{model_dir} has no {' or '.join(missing)}. {fix}")
    try:
        return read_description(model_dir)
    except ModelDescriptionError as error:
        raise ModelError(str(error)) from error


def replicate_dirs(model_dir: str | Path, description: dict) -> list[Path]:
    """The replicate folders an ensemble's model.json names (empty for a single model)."""
    return [Path(model_dir) / name for name in description.get("replicates", [])]


def load_trained_model(
    model_dir: str | Path, device: torch.device | str = "cpu", elements_only_for: str | None = None
) -> tuple[TrainedModel, dict]:
    """The model of a folder, in eval mode on `device`, and its `model.json`; ModelError says what to give instead.

    An ensemble's folder gives an EnsembleModel of its replicates (module docstring).
    `elements_only_for` names a command that scores element windows only (the explain
    target's attributions): a span model is then refused before its weights are read.
    """
    model_dir = Path(model_dir)
    description = read_model_description(model_dir)
    if elements_only_for and reads_spans(description):
        raise ModelError(
            f"{model_dir} is a span model (input: span); `{elements_only_for}` scores element-window models only "
            "for now. Give a model trained with input: elements, or score spans through the workflow's evaluate rule."
        )
    replicates = replicate_dirs(model_dir, description)
    if not replicates:
        warn_of_another_scan(model_dir, description, torch.device(device))
        return _load_weights(model_dir, description).to(device).eval(), description
    models = []
    for folder in replicates:
        if read_model_description(folder)["model"] != description["model"]:
            raise ModelError(
                f"{description_path(folder)} describes another model than the ensemble's "
                f"{description_path(model_dir)}: the replicates of an ensemble are one model trained with different "
                "seeds. Re-run its training."
            )
        models.append(load_trained_model(folder, device)[0])
    return EnsembleModel(models).to(device).eval(), description


def warn_of_another_scan(model_dir: Path, description: dict, device: torch.device) -> None:
    """Warn where a delta-rule model was trained under another scan than this process would run (model.json's
    `delta_kernel`): its scores then differ from the training run's in their last digits."""
    trained = description.get("delta_kernel")
    if trained and trained != (now := scan_kernel_name(device)):
        log.warning(
            "%s was trained with the %s scan of its delta rule and is scored here with the %s one: scores differ "
            "from its training run's in their last digits (about 1e-6). Set %s=%s to score it as it was trained.",
            model_dir, trained, now, KERNEL_VARIABLE, trained,
        )  # fmt: skip


def _load_weights(model_dir: Path, description: dict) -> EPITransformer:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        model = EPITransformer(ModelConfig(**description["model"]))
        model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    except (RuntimeError, ValueError, TypeError, KeyError, SafetensorError) as error:
        raise ModelError(
            f"{model_dir / 'model.safetensors'} does not load into the model that {description_path(model_dir)} "
            f"describes ({type(error).__name__}: {str(error)[:300]}). The two files belong together: copy both "
            "from the same training run, or re-train."
        ) from error
    return model


@torch.no_grad()
def predict_split(
    model,
    data,
    batch_size: int = SCORING_BATCH_SIZE,
    device: torch.device | str = "cpu",
    max_tokens: int = SCORING_TOKENS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Probabilities, labels and pair ids for a split, in the data's row order; centred windows, no augmentation.

    Window pairs go `batch_size` at a time; spans by length, within `max_tokens` model tokens a batch.
    """
    device = torch.device(device)
    model.eval()
    config = model.config
    batches = model_batches(config.input, data, batch_size, max_tokens, config.patch_size, config.between)
    scores, labels, ids, rows = [], [], [], []
    for index, batch in enumerate(batch_loader(batches)):
        with mixed_precision(device):
            logits = score_batch(model, config, batch, device)
        scores.append(torch.sigmoid(logits.float()).cpu().numpy())
        labels.append(batch["label"].numpy())
        ids.append(batch["pair_id"].numpy())
        rows.append(batches.batches[index])
    order = np.argsort(np.concatenate(rows), kind="stable")  # span batches come in length order
    return (np.concatenate(scores)[order], np.concatenate(labels).astype(int)[order], np.concatenate(ids)[order])
