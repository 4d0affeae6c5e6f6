"""Training curves of one (cell line, model)."""

from epiformer.plots import plot_training
from epiformer.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_training(snakemake.wildcards.cell, snakemake.wildcards.model, snakemake.input.log_table, snakemake.output[0])
