"""One table of every (cell line, model or baseline) result."""

from epiformer.evaluation.summary import ModelResult, write_summary
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
results = [
    ModelResult(
        cell_line=entry["cell_line"],
        model=entry["model"],
        metrics=metrics,
        description=entry["description"] or None,
        predictions=predictions,
        truth=entry["truth"] or None,
        windows_stats=entry["windows_stats"],
        windows=entry["windows"],
    )
    for entry, metrics, predictions in zip(
        snakemake.params.results, snakemake.input.metrics, snakemake.input.predictions
    )
]
table = write_summary(
    results,
    snakemake.output.tsv,
    snakemake.output.markdown,
    paired_path=snakemake.output.paired,
    resamples=snakemake.params.bootstrap,
    seed=snakemake.params.seed,
    bootstrap_unit=snakemake.params.bootstrap_unit,
    distance_bins_path=snakemake.output.distance_bins,
    distance_bins=snakemake.params.distance_bins,
    distance_strata=snakemake.params.distance_strata,
    selection=snakemake.input.selection,
)
log.info("Summary:\n%s", table.to_string(index=False))
