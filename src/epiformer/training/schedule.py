"""The order trainings start in when a run has fewer cores than jobs (Snakemake's `priority`).

When cores are short, the run ends when its last long job ends, so the longest trainings go first
(longest-processing-time-first scheduling) and the short ones fill the cores' ends. A training's
length is read off its token budget (`max_tokens`: the model's own, else `train.max_tokens`; none
counts as the longest, as epochs bound it alone), and at one budget a length control goes before
the other trainings: it trains the same tokens and shuffles every span's between-sequence too.
A budget does not tell a softmax span model's cost (quadratic in its spans' lengths, which the
plan does not know): a model entry's `train_first: true` starts it before every other training
(make demo-long's softmax_span: its 0.83 M tokens take as long as M7's 50 M, and its scoring,
started last, held the run's end for about 13 minutes on one core while the other idled).

In `make demo-scale` (two cores) this puts the control (27 min) and a replicate (28) first, then the
other replicate (28) and softmax_span (2 M tokens, 18 min) beside each other: 56 minutes of training
where starting softmax_span first, as this order did before, paired the control with a replicate
and took 59 (docs/results/demo_scale.md). Torch-free: the workflow's plan calls it.
"""

from __future__ import annotations

import math

TRAINING_PRIORITY = 10  # above every other job's (Snakemake's default 0): trainings first, then their scoring
# Encoding shards goes before every training: it is short and every training of its kind waits on it. With
# two threads it needs both cores free, and behind the trainings it found them only when the last span
# model had finished (make demo-scale: the element-window shards, and the models that read them, then
# held the run's end for a minute).
ENCODING_PRIORITY = 1000


def token_budget(entry: dict, train: dict) -> float:
    """A model's training budget in model tokens (its `max_tokens`, else train's); inf when none is set."""
    budget = entry.get("max_tokens", train.get("max_tokens"))
    return math.inf if budget is None else float(budget)


def training_priorities(models: dict, train: dict) -> dict[str, int]:
    """Snakemake priority of each model's training (`models:` entries of a config, its `train:` block): the
    larger the token budget the higher; at one budget a length control (`between: shuffled`) one above;
    `train_first` entries above all."""
    budgets = sorted({token_budget(entry, train) for entry in models.values()})
    return {
        name: TRAINING_PRIORITY
        + 2 * budgets.index(token_budget(entry, train))
        + (entry.get("between", "sequence") == "shuffled")
        + 2 * len(budgets) * bool(entry.get("train_first", False))
        for name, entry in models.items()
    }
