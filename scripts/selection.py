"""The run's choice of M7, from validation predictions alone (results/selection.tsv)."""

from epiformer.evaluation.selection import ValidationResult, write_selection
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
results = [
    ValidationResult(cell_line=cell, model=model, predictions=predictions, model_dir=folder)
    for (cell, model, folder), predictions in zip(snakemake.params.results, snakemake.input.predictions)
]
table = write_selection(results, snakemake.output[0])
log.info("Chosen on validation:\n%s", table.to_string(index=False))
