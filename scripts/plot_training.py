"""Training curves of one (cell line or pooled, model)."""

from pathlib import Path

from epiformer.evaluation.plots import plot_training
from epiformer.io.model_description import read_description
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
split_mode = read_description(Path(snakemake.input.description).parent)["split"]["mode"]
plot_training(
    snakemake.params.trained_on,
    snakemake.wildcards.model,
    list(snakemake.input.log_tables),
    snakemake.output.png,
    split_mode,
)
