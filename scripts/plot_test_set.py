"""One test-set figure of every model and baseline of one cell line, named by the `figure` wildcard."""

from epiformer.evaluation.plots import TEST_SET_FIGURES
from epiformer.io.metrics_file import read_metrics
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
split_mode = read_metrics(snakemake.input.metrics[0])["split"]["mode"]
predictions = dict(zip(snakemake.params.models, snakemake.input.predictions))
plot = TEST_SET_FIGURES[snakemake.wildcards.figure]
plot(snakemake.wildcards.cell, predictions, snakemake.output.png, split_mode)
