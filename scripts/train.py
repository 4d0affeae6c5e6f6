"""Train one model on one cell line's shards."""

from pathlib import Path

from epiformer.model import ModelConfig
from epiformer.runlog import setup_logging
from epiformer.train import TrainConfig, train_model

log = setup_logging(snakemake.log[0])
cluster_only = {"mem_mb", "runtime"}
train_config = TrainConfig(
    **{k: v for k, v in snakemake.params.train.items() if k not in cluster_only},
    max_shift=snakemake.params.augment["max_shift"],
    reverse_complement=snakemake.params.augment["reverse_complement"],
)
train_config.threads = max(1, snakemake.threads // train_config.devices)  # per process
shards = snakemake.input.shards  # one folder, or a pooled model's list of them
description = train_model(
    shards if isinstance(shards, str) else [str(folder) for folder in shards],
    ModelConfig(**snakemake.params.model),
    train_config,
    Path(snakemake.output.weights).parent,
    snakemake.params.checkpoint_dir,
)
log.info("Best epoch %d (validation AUPRC %.4f)", description["best_epoch"], description["best_val_auprc"])
