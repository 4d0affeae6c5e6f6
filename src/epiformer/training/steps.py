"""The steps a training run takes: each epoch's batches, and where the token budget ends the run.

An epoch's batches depend only on (seed, epoch) and the process's rank, so a resumed run sees
the same; every process computes every step's model tokens from the batch plans alone, so a
token budget (`train.max_tokens`) stops all of them at the same step with no message between
them, on any machine (`budget_plan`). `training.train` runs the plan.
"""

from __future__ import annotations

import numpy as np

from epiformer.data.batches import model_batches
from epiformer.model.configs import ModelConfig, TrainConfig


def epoch_batches(train_data, model_config: ModelConfig, train_config: TrainConfig, epoch: int, rank: int, world: int):
    """This process's share of an epoch; depends only on (seed, epoch), so a resumed run sees the same.

    Window pairs come `batch_size` (global) at a time; spans by length, each process's
    batch within `max_tokens_per_batch` model tokens (a patch of bases each), padding included.
    """
    augmentation = {
        "shuffle": True,
        "seed": train_config.seed,
        "epoch": epoch,
        "max_shift": train_data.flank if train_config.max_shift is None else train_config.max_shift,
        "reverse_complement_prob": 0.5 if train_config.reverse_complement else 0.0,
        "rank": rank,
        "world_size": world,
    }
    batch_size, max_tokens = train_config.batch_size // world, train_config.max_tokens_per_batch
    return model_batches(
        model_config.input,
        train_data,
        batch_size,
        max_tokens,
        model_config.patch_size,
        model_config.between,
        **augmentation,
    )


def step_tokens(train_data, model_config: ModelConfig, train_config: TrainConfig, epoch: int, world: int) -> np.ndarray:
    """int64 [steps]: the model tokens (padding left out) of each step of `epoch`, all processes together.

    Every process computes the same numbers from the batch plans alone, so a token budget
    stops all of them at the same step with no message between them, on any machine.
    """
    ranks = [epoch_batches(train_data, model_config, train_config, epoch, rank, world) for rank in range(world)]
    return np.sum([batch_tokens(batches, model_config) for batches in ranks], axis=0).astype(np.int64)


def batch_tokens(batches, model_config: ModelConfig) -> np.ndarray:
    """int64 [batches]: model tokens in each batch (SpanBatches for a model that reads spans, else PairBatches),
    padding left out."""
    patch_size = model_config.patch_size
    if model_config.reads_spans:
        return np.array([(-(-batches.span_lengths[rows] // patch_size)).sum() for rows in batches.batches], np.int64)
    per_pair = sum(-(-width // patch_size) for width in batches.shards.widths.values())
    return np.array([per_pair * len(rows) for rows in batches.batches], np.int64)


def budget_plan(train_data, model_config: ModelConfig, train_config: TrainConfig, world: int) -> list[np.ndarray]:
    """Each epoch's step tokens (`step_tokens`), cut where train.max_tokens is reached: the steps the run takes.

    Training stops after the step that reaches the budget; epochs past it are left out. With no
    budget, every step of every epoch. The learning-rate schedule is laid over these steps.
    """
    plan, spent = [], 0
    for epoch in range(1, train_config.epochs + 1):
        tokens = step_tokens(train_data, model_config, train_config, epoch, world)
        if train_config.max_tokens:
            if spent >= train_config.max_tokens:
                break
            reached = np.flatnonzero(spent + np.cumsum(tokens) >= train_config.max_tokens)
            if len(reached):
                tokens = tokens[: reached[0] + 1]
        plan.append(tokens)
        spent += int(tokens.sum())
    return plan
