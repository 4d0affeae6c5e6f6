"""Test AUROC against training time of every Transformer, from the summary."""

from epiformer.evaluation.plots import plot_cost
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_cost(snakemake.input.summary, snakemake.output.png)
