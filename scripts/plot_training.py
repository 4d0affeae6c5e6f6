"""Training curves of one (cell line or pooled, model)."""

import json
from pathlib import Path

from epiformer.evaluation.plots import plot_training
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
split_mode = json.loads(Path(snakemake.input.description).read_text())["split"]["mode"]
plot_training(
    snakemake.params.trained_on,
    snakemake.wildcards.model,
    list(snakemake.input.log_tables),
    snakemake.output.png,
    split_mode,
)
