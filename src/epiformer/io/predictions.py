"""Prediction tables, `pair_id, label, score` (probability), one row per scored pair, by pair_id: their one writer
and their reader.

A model's test `predictions.tsv` (evaluation, baselines), its `validation_predictions.tsv` and
the validation scores training keeps beside its weights (`val_predictions.tsv`) share the
format. Scores are written exactly (constants.SCORE_FORMAT), so every metric recomputes from the
file. `read_predictions` checks what every reader relies on and names the file when it fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import SCORE_FORMAT
from epiformer.io.files import atomic_write_text


def write_predictions(frame: pd.DataFrame, path) -> None:
    """A prediction table (module docstring), by pair_id, atomically."""
    text = frame.sort_values("pair_id").to_csv(sep="\t", index=False, float_format=SCORE_FORMAT)
    atomic_write_text(Path(path), text)


class PredictionsFileError(ValueError):
    """A prediction table that is not one this package wrote: the message names the file and the fix."""


def read_predictions(path) -> pd.DataFrame:
    """A prediction table (module docstring): pair_id, label (0/1) and a finite score, pair_ids unique (a model's
    and a baseline's scores are probabilities; a ranking is all a metric needs)."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, sep="\t")
    except (OSError, ValueError) as error:
        raise PredictionsFileError(f"{path}: not readable ({type(error).__name__}: {error}); {_FIX}") from error
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise PredictionsFileError(f"{path}: lacks the column(s) {', '.join(missing)}; {_FIX}")
    problems = {
        "a pair_id appears twice": frame["pair_id"].duplicated().any(),
        "a label is not 0 or 1": not frame["label"].isin([0, 1]).all(),
        "a score is missing or not a finite number": not np.isfinite(
            pd.to_numeric(frame["score"], errors="coerce")
        ).all(),
    }
    for problem, found in problems.items():
        if found:
            raise PredictionsFileError(f"{path}: {problem}; {_FIX}")
    return frame[list(COLUMNS)]


COLUMNS = ("pair_id", "label", "score")
_FIX = "re-run the job that wrote it (snakemake --forcerun on the file) or restore it"
