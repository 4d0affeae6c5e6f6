"""The scaling figure re-drawn from a stored benchmark table (docs/scaling_cpu.tsv)."""

from epiformer.evaluation.plots import plot_scaling
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
plot_scaling(
    snakemake.input.table,
    snakemake.output.png,
    measured="a reference measurement shipped with epiformer (docs/scaling_cpu.tsv), not this run's: "
    "`snakemake scaling` measures this machine",
)
