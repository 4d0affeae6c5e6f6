"""Fit one baseline on every cell line's train split at once; score each cell line's test split as pooled models'."""

from epiformer.evaluation.baselines import run_pooled_baseline
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
every_metrics = run_pooled_baseline(
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
for cell, metrics in zip(snakemake.params.cells, every_metrics):
    log.info(
        "%s baseline, pooled, on %s: test AUROC %.4f, AUPRC %.4f on %d pairs",
        snakemake.wildcards.baseline,
        cell,
        metrics["auroc"],
        metrics["auprc"],
        metrics["n_test"],
    )
