"""Score the test split with a trained model (threshold: its validation predictions); write predictions, metrics."""

from pathlib import Path

from epiformer.evaluation.evaluate import evaluate_model
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
metrics = evaluate_model(
    Path(snakemake.input.description).parent,
    snakemake.input.shards,
    snakemake.output.predictions,
    snakemake.output.metrics,
    resamples=snakemake.params.bootstrap,
    seed=snakemake.params.seed,
    max_tokens=snakemake.params.max_tokens,
    device=snakemake.params.device,
    replicate_predictions=list(snakemake.output.replicates),
    windows=snakemake.input.windows,
    bootstrap_unit=snakemake.params.bootstrap_unit,
    validation_predictions=snakemake.input.validation,
)
log.info("Test AUROC %.4f, AUPRC %.4f on %d pairs", metrics["auroc"], metrics["auprc"], metrics["n_test"])
