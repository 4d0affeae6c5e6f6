"""Train x test heatmaps of one model's transfer table."""

from epiformer.plots import plot_transfer
from epiformer.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_transfer(snakemake.input.table, snakemake.wildcards.model, snakemake.output.png)
