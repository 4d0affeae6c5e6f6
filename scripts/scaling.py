"""Linear vs softmax scaling benchmark: a TSV and a log-log plot.

The measuring code is a benchmark, not part of the package: benchmarks/scaling.py, loaded
from the workflow's checkout.
"""

import importlib.util
from pathlib import Path

from epiformer.evaluation.plots import plot_scaling
from epiformer.io.runlog import setup_logging

_source = Path(snakemake.scriptdir).parent / "benchmarks" / "scaling.py"
_spec = importlib.util.spec_from_file_location("scaling_benchmark", _source)
scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaling)

log = setup_logging(snakemake.log[0])
table = scaling.scaling_table(
    snakemake.params.lengths,
    snakemake.params.softmax_max_tokens,
    snakemake.params.model_max_tokens,
    snakemake.params.device,
    snakemake.threads,
    log=log.info,
)
table.to_csv(snakemake.output.table, sep="\t", index=False)
plot_scaling(snakemake.output.table, snakemake.output.plot)
for line in scaling.summarise(table):
    log.info(line)
