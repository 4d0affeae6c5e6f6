"""Read a cell line's pairs, place windows, assign splits, audit overlap across splits."""

from epiformer.data.splits import SplitSpec
from epiformer.data.windows import WindowSpec, build_windows
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
build_windows(
    snakemake.input.pairs,
    snakemake.input.genome,
    WindowSpec(**snakemake.params.windows),
    SplitSpec.from_config(snakemake.params.split),
    snakemake.output.windows,
    snakemake.output.audit,
    snakemake.output.stats,
)
