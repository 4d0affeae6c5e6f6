"""Fit one baseline (distance, kmer, distance_kmer or propensity) on train; score the test split as the models are."""

from epiformer.evaluation.baselines import run_baseline
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
metrics = run_baseline(
    snakemake.wildcards.baseline,
    snakemake.input.windows,
    snakemake.input.shards,
    snakemake.output.predictions,
    snakemake.output.metrics,
    kmer_size=snakemake.params.kmer_size,
    pseudo_pairs=snakemake.params.pseudo_pairs,
    resamples=snakemake.params.bootstrap,
    seed=snakemake.params.seed,
    bootstrap_unit=snakemake.params.bootstrap_unit,
)
log.info(
    "%s baseline: test AUROC %.4f, AUPRC %.4f on %d pairs",
    snakemake.wildcards.baseline,
    metrics["auroc"],
    metrics["auprc"],
    metrics["n_test"],
)
