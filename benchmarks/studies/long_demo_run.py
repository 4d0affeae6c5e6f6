"""What the long-demo studies share: where `make demo-long` ran, and the span model it trains.

Imported by the studies beside it as `long_demo_run` (run as `python benchmarks/studies/<study>.py`,
which puts this folder on the path), and as `studies.long_demo_run` by the benchmarks that time
the same span model (benchmarks/conv_stem.py, gpu_check.py: run from benchmarks/).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from epiformer.model.configs import architecture
from epiformer.synthetic.demo_long import LongDemoSpec

LONG_DEMO_CONFIG = Path(__file__).resolve().parents[2] / "config" / "demo_long.yaml"
RUN = Path("runs/demo-long")  # where `make demo-long` runs (the Makefile)
CELL = LongDemoSpec().cell


def span_model_settings() -> dict:
    """`models.linear_span` of config/demo_long.yaml as ModelConfig keywords, less its attention (the benchmarks
    choose it) and how the workflow trains it (pooled, replicates)."""
    entry = architecture(yaml.safe_load(LONG_DEMO_CONFIG.read_text())["models"]["linear_span"])
    return {key: value for key, value in entry.items() if key != "attention"}


def train_settings(overlay: Path) -> dict:
    """TrainConfig keywords of a demo overlay on config/config.yaml, as the workflow resolves them: the two
    `train:` blocks layered, with `augment.reverse_complement` (workflow/rules/common.smk)."""
    base, top = (yaml.safe_load(path.read_text()) for path in (overlay.parent / "config.yaml", overlay))
    train = {**base["train"], **top.get("train", {})}
    train["reverse_complement"] = {**base["augment"], **top.get("augment", {})}["reverse_complement"]
    return train


def truth_path(run: Path, cell: str = CELL) -> Path:
    """The generator's truth table of a demo run (the long demo's, or `cell`'s: demo_scale writes the same)."""
    return run / "resources" / cell / f"{cell}.truth.tsv"


def results_dir(run: Path, cell: str = CELL) -> Path:
    return run / "results" / cell
