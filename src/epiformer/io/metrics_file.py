"""metrics.json, a model's or baseline's test metrics on one cell line: its one reader and its one writer.

Evaluation (`evaluation.evaluate`) and the baselines (`evaluation.baselines`) write it beside predictions.tsv;
the summary and the test-set figures read it. Its keys: `evaluation.metrics.compute_metrics` and
docs/outputs.md. Torch-free, like the jobs that read it.
"""

from __future__ import annotations

import json
from pathlib import Path

from epiformer.io.files import atomic_write_text

METRICS_JSON = "metrics.json"
REQUIRED = ("auroc", "auprc", "auroc_ci95", "auprc_ci95", "n_test", "positives", "split")


class MetricsFileError(ValueError):
    """A metrics.json that is not one evaluation wrote: the message names the file and the fix."""


def metrics_path(result_dir: str | Path) -> Path:
    return Path(result_dir) / METRICS_JSON


def read_metrics(path: str | Path) -> dict:
    """A metrics.json (`path`: the file), checked to hold the figures every reader uses (REQUIRED)."""
    path = Path(path)
    try:
        metrics = json.loads(path.read_text())
        missing = [key for key in REQUIRED if key not in metrics]
    except (OSError, json.JSONDecodeError, TypeError) as error:
        raise MetricsFileError(f"{path}: not readable as metrics ({type(error).__name__}: {error}); {_FIX}") from error
    if missing:
        raise MetricsFileError(f"{path}: lacks {', '.join(missing)}; {_FIX}")
    return metrics


def write_metrics(path: str | Path, metrics: dict) -> None:
    """Write `metrics` to `path` atomically (indented JSON)."""
    atomic_write_text(Path(path), json.dumps(metrics, indent=2))


_FIX = "re-run its evaluate (or baseline) job, e.g. snakemake --forcerun evaluate baseline, or restore the file"
