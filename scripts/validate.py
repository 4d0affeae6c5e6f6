"""Score the validation split alone with a trained model (or ensemble); write its predictions."""

from pathlib import Path

from epiformer.evaluation.evaluate import score_validation
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
frame = score_validation(
    Path(snakemake.input.description).parent,
    snakemake.input.shards,
    snakemake.output.predictions,
    max_tokens=snakemake.params.max_tokens,
    device=snakemake.params.device,
)
log.info("Validation: %d pairs, %d positive", len(frame), int(frame["label"].sum()))
