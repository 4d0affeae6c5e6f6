"""Prediction tables: `pair_id, label, score` (probability), one row per scored pair, by pair_id.

A model's test `predictions.tsv` (evaluation, baselines) and the validation scores training
keeps beside its weights (`val_predictions.tsv`) share the format. Scores are written exactly
(constants.SCORE_FORMAT), so every metric recomputes from the file.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from epiformer.constants import SCORE_FORMAT
from epiformer.io.files import atomic_write_text


def write_predictions(frame: pd.DataFrame, path) -> None:
    """A prediction table (module docstring), by pair_id, atomically."""
    text = frame.sort_values("pair_id").to_csv(sep="\t", index=False, float_format=SCORE_FORMAT)
    atomic_write_text(Path(path), text)
