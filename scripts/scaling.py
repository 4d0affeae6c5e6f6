"""Linear vs softmax scaling (`epiformer.model.scaling`): a TSV and a log-log plot."""

from epiformer.evaluation.plots import plot_scaling
from epiformer.io.runlog import setup_logging
from epiformer.model import scaling

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
