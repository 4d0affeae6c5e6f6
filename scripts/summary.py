"""One table of every (cell line, model) result."""

from epiformer.runlog import setup_logging
from epiformer.summary import ModelResult, write_summary

log = setup_logging(snakemake.log[0])
results = [
    ModelResult(
        cell_line=entry["cell_line"],
        model=entry["model"],
        metrics=metrics,
        description=description,
        predictions=predictions,
        truth=entry["truth"] or None,
    )
    for entry, metrics, description, predictions in zip(
        snakemake.params.results, snakemake.input.metrics, snakemake.input.descriptions, snakemake.input.predictions
    )
]
table = write_summary(results, snakemake.output.tsv, snakemake.output.markdown)
log.info("Summary:\n%s", table.to_string(index=False))
