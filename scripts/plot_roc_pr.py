"""ROC and precision-recall curves of every model of one cell line."""

from epiformer.plots import plot_roc_pr
from epiformer.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_roc_pr(snakemake.wildcards.cell, dict(zip(snakemake.params.models, snakemake.input.predictions)), snakemake.output[0])
