"""Fit one baseline (distance, kmer, distance_kmer or propensity) on train and score the test split as the models
are: on the job's cell line (rule baseline), or once on every cell line's train pairs and on each cell line's test
pairs (rule pooled_baseline, beside pooled models)."""

from epiformer.evaluation.baselines import run_baseline, run_pooled_baseline
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
name = snakemake.wildcards.baseline
options = {
    "kmer_size": snakemake.params.kmer_size,
    "pseudo_pairs": snakemake.params.pseudo_pairs,
    "resamples": snakemake.params.bootstrap,
    "seed": snakemake.params.seed,
    "bootstrap_unit": snakemake.params.bootstrap_unit,
}
inputs = (snakemake.input.windows, snakemake.input.shards, snakemake.output.predictions, snakemake.output.metrics)
if snakemake.rule == "pooled_baseline":
    scored = zip(snakemake.params.cells, run_pooled_baseline(name, *inputs, **options))
    label = f"{name} baseline, pooled,"
else:
    scored = [(snakemake.wildcards.cell, run_baseline(name, *inputs, **options))]
    label = f"{name} baseline"
for cell, metrics in scored:
    log.info(
        "%s on %s: test AUROC %.4f, AUPRC %.4f on %d pairs",
        label,
        cell,
        metrics["auroc"],
        metrics["auprc"],
        metrics["n_test"],
    )
