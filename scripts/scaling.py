"""Linear vs softmax scaling benchmark: a TSV and a log-log plot."""

from epiformer.plots import plot_scaling
from epiformer.runlog import setup_logging
from epiformer.scaling import scaling_table, summarise

log = setup_logging(snakemake.log[0])
table = scaling_table(
    snakemake.params.lengths,
    snakemake.params.softmax_max_tokens,
    snakemake.params.model_max_tokens,
    snakemake.params.device,
    snakemake.threads,
    log=log.info,
)
table.to_csv(snakemake.output.table, sep="\t", index=False)
plot_scaling(snakemake.output.table, snakemake.output.plot)
for line in summarise(table):
    log.info(line)
