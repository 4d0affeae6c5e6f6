"""Read a cell line's pairs, place windows, assign splits, audit overlap across splits."""

from epiformer.runlog import setup_logging
from epiformer.splits import SplitSpec
from epiformer.windows import WindowSpec, build_windows

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
