"""Train one model on one cell line's shards (or a pooled model on every cell line's)."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.model.configs import ModelConfig, TrainConfig
from epiformer.training.train import train_model

log = setup_logging(snakemake.log[0])
train_config = TrainConfig(**snakemake.params.train, reverse_complement=snakemake.params.reverse_complement)
if snakemake.threads < train_config.threads * train_config.devices:  # Snakemake gave fewer (--cores, --set-threads)
    train_config.threads = max(1, snakemake.threads // train_config.devices)
    log.warning("The job got %d threads: %d per training process.", snakemake.threads, train_config.threads)
shards = snakemake.input.shards  # one folder, or a pooled model's list of them
description = train_model(
    shards if isinstance(shards, str) else [str(folder) for folder in shards],
    ModelConfig(**snakemake.params.model),
    train_config,
    Path(snakemake.output.weights).parent,
    snakemake.params.checkpoint_dir,
)
log.info("Best epoch %d (validation AUPRC %.4f)", description["best_epoch"], description["best_val_auprc"])
