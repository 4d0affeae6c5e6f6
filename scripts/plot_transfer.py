"""Train x test heatmaps of one model's transfer table."""

from epiformer.evaluation.plots import plot_transfer
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_transfer(snakemake.input.table, snakemake.wildcards.model, snakemake.output.png)
