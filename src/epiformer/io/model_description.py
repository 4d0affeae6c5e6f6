"""model.json, a trained model's description: its one reader and its one writer.

Training writes it beside the weights (`training.outputs.write_outputs`), an ensemble's from its
replicates' (`training.replicates`); evaluation, the summary, scoring and the plots read it.
docs/outputs.md gives its keys. Torch-free, so that the workflow's light jobs read it cheaply.
"""

from __future__ import annotations

import json
from pathlib import Path

from epiformer.constants import ELEMENTS, SPAN_INPUT
from epiformer.io.files import atomic_write_text

MODEL_JSON = "model.json"


class ModelDescriptionError(ValueError):
    """A model.json that is not a description written by training: the message names the file and the fix."""


def description_path(model_dir: str | Path) -> Path:
    return Path(model_dir) / MODEL_JSON


def read_description(model_dir: str | Path) -> dict:
    """The model.json of `model_dir`, checked to hold a model config and the windows' widths."""
    path = description_path(model_dir)
    try:
        description = json.loads(path.read_text())
        dict(description["model"])
        for element in ELEMENTS:
            int(description["windows"][f"{element}_width"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ModelDescriptionError(
            f"{path} is not a model description written by epiformer training "
            f"({type(error).__name__}: {error}). Re-run training for this model, or restore the file."
        ) from error
    return description


def read_description_if_any(model_dir: str | Path) -> dict:
    """The model.json of `model_dir` as written, unchecked; {} where there is none or it is not JSON."""
    try:
        return json.loads(description_path(model_dir).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def reads_spans(description: dict) -> bool:
    """Whether the model a description holds reads spans (ModelConfig.reads_spans, without building the config)."""
    return description.get("model", {}).get("input") == SPAN_INPUT


def write_description(model_dir: str | Path, description: dict) -> None:
    """Write `model_dir`/model.json atomically (indented JSON)."""
    atomic_write_text(description_path(model_dir), json.dumps(description, indent=2))
