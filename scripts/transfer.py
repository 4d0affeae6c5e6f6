"""Score one model trained on each cell line on every cell line's test split."""

from pathlib import Path

from epiformer.evaluation.transfer import write_transfer
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
cells = snakemake.params.cells
model_dirs = {cell: Path(description).parent for cell, description in zip(cells, snakemake.input.descriptions)}
shard_dirs = dict(zip(cells, snakemake.input.shards))
table = write_transfer(
    model_dirs,
    shard_dirs,
    snakemake.output.table,
    max_tokens=snakemake.params.max_tokens,
    device=snakemake.params.device,
)
log.info("Transfer of %s:\n%s", snakemake.wildcards.model, table.to_string(index=False))
