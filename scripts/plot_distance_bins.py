"""AUROC and AUPRC within distance bins of each cell line's test pairs, every model and baseline."""

from epiformer.evaluation.plots import plot_distance_bins
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_distance_bins(snakemake.input.table, snakemake.output.png)
