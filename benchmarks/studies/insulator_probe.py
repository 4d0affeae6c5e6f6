"""Can a model find the insulator? Side by side: M7 and a one-layer CNN, each pooling by mean or by max.

The long demo's label needs two things: the partner grammar of the two elements, and whether
a cluster of four CTCF sites lies anywhere between them. This probe isolates the second. It
trains on the long demo's span shards (from `make demo-long`) with each pair's label replaced
by `insulated` from the generator's truth (half the pairs of every class, so the classes are
balanced and the elements tell nothing), and prints validation AUROC after each epoch:

- `m7-mean`, `m7-max`: the span model of config/demo_long.yaml (d_model 32, 2 layers, 4 heads,
  4-bp patches) with `pool: mean` (M7) or `pool: max`, AdamW at `--lr`, batches of
  `--max-tokens` model tokens, the workflow's augmentation (shift, reverse complement);
- `m7conv-mean`, `m7conv-max`: the same model with `stem: conv` in place of its linear
  tokenizer: 19-bp filters (a CTCF site), ReLU, the largest value in each 4-bp patch (as
  Enformer's and Borzoi's stems do, in one layer);
- `cnn-mean`, `cnn-max`: 16 filters 19 bp wide (a CTCF site), ReLU, mean or max over the span,
  one linear unit: the simplest model that can find a site, as the yardstick.

An insulator is 4 sites (about 160 bp, 40 tokens) in spans of up to 53 kb (13,000 tokens). Usage:
    python benchmarks/studies/insulator_probe.py [--epochs 3] [--models m7-mean m7-max cnn-mean cnn-max]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from long_demo_run import RUN, results_dir, span_model_settings, truth_path
from sklearn.metrics import roc_auc_score

from epiformer.data.batches import SpanBatches
from epiformer.data.shards import load_split
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer

M7_KERNEL = 12  # bases per token of M7's linear stem, as config/config.yaml's models read them

SITE_WIDTH = 19  # bases of a CTCF site (JASPAR MA0139.1): the conv stem's filter width


class SiteCNN(nn.Module):
    """One convolution the width of a CTCF site, ReLU, pooled over the valid bases, one output."""

    def __init__(self, pool: str, filters: int = 16, width: int = SITE_WIDTH):
        super().__init__()
        self.pool, self.width = pool, width
        self.conv, self.out = nn.Conv1d(4, filters, width), nn.Linear(filters, 1)

    def forward(self, span=None, segment=None, span_valid=None):
        h = torch.relu(self.conv(span.transpose(1, 2)))  # (B, F, L - width + 1)
        valid = span_valid[:, None, self.width - 1 :]
        if self.pool == "max":
            pooled = h.masked_fill(~valid, 0.0).amax(dim=-1)
        else:
            pooled = (h * valid).sum(dim=-1) / valid.sum(dim=-1).clamp(min=1)
        return self.out(pooled).squeeze(-1)


def build(name: str, kernel_size: int) -> tuple[nn.Module, int]:
    """The model and its patch size (what the token budget counts in)."""
    kind, pool = name.split("-")
    if kind in ("m7", "m7conv"):
        stem = "conv" if kind == "m7conv" else "linear"
        width = SITE_WIDTH if stem == "conv" else kernel_size
        settings = {**span_model_settings(), "kernel_size": width, "stem": stem, "pool": pool}
        config = ModelConfig(attention="linear", **settings)
        return EPITransformer(config), config.patch_size
    return SiteCNN(pool), 1


def insulated_split(shard_dir: Path, truth: pd.DataFrame, split: str):
    spans = load_split(shard_dir, split)
    spans.label = truth.loc[spans.pair_id, "insulated"].to_numpy().astype(np.uint8)
    return spans


def validation_auroc(model: nn.Module, spans, max_tokens: int, patch: int) -> float:
    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for batch in SpanBatches(spans, 4 * max_tokens, patch):
            scores.append(model(span=batch["span"], segment=batch["segment"], span_valid=batch["span_valid"]))
            labels.append(batch["label"])
    model.train()
    return roc_auc_score(torch.cat(labels).numpy(), torch.cat(scores).numpy())


def probe(name: str, train, val, args) -> list[tuple[int, float, float]]:
    """(epoch, validation AUROC, seconds so far) after each epoch."""
    epochs, lr, max_tokens, seed = args.epochs, args.lr, args.max_tokens, args.seed
    torch.manual_seed(seed)
    model, patch = build(name, args.kernel_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rows, start = [], time.perf_counter()
    for epoch in range(epochs):
        batches = SpanBatches(
            train,
            max_tokens,
            patch,
            shuffle=True,
            seed=seed,
            epoch=epoch,
            max_shift=train.flank,
            reverse_complement_prob=0.5,
        )
        for batch in batches:
            logits = model(span=batch["span"], segment=batch["segment"], span_valid=batch["span_valid"])
            loss = F.binary_cross_entropy_with_logits(logits, batch["label"])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        seconds = time.perf_counter() - start
        rows.append((epoch + 1, validation_auroc(model, val, max_tokens, patch), seconds))
        print(f"{name:9s} epoch {epoch + 1}: validation AUROC {rows[-1][1]:.3f} after {seconds:.0f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=Path, default=results_dir(RUN) / "span_shards")
    parser.add_argument("--truth", type=Path, default=truth_path(RUN))
    parser.add_argument(
        "--models", nargs="+", default=["m7-mean", "m7-max", "m7conv-mean", "m7conv-max", "cnn-mean", "cnn-max"]
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-tokens", type=int, default=16384)
    parser.add_argument("--kernel-size", type=int, default=M7_KERNEL, help="M7's bases per token")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not args.shards.is_dir():
        raise SystemExit(f"{args.shards}: no span shards; run `make demo-long` first (or give --shards and --truth).")
    torch.set_num_threads(args.threads)
    truth = pd.read_csv(args.truth, sep="\t").set_index("pair_id")
    train, val = (insulated_split(args.shards, truth, split) for split in ("train", "val"))
    print(f"{len(train)} training spans, {len(val)} validation spans, {train.label.mean():.0%} insulated")
    results = {name: probe(name, train, val, args) for name in args.models}
    print("\nvalidation AUROC, epoch by epoch (insulated or not):")
    for name, rows in results.items():
        print(f"{name:9s} " + "  ".join(f"{auroc:.3f}" for _, auroc, _ in rows) + f"   ({rows[-1][2]:.0f} s)")


if __name__ == "__main__":
    main()
