"""AUROC and AUPRC with 95% intervals of every model and baseline, from the summary."""

from epiformer.evaluation.plots import plot_comparison
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_comparison(snakemake.input.summary, snakemake.output.png)
