"""Why span models at coarse tokens did not learn the long demo, and what makes them learn: a study.

Each variant is the long demo's span model (config/demo_long.yaml's `linear_span`) at `--patch` bp a token
with the `conv_exp` stem (19-bp exp filters, one per channel, pooled over each patch), trained with the
package's own trainer on the long demo's span shards (from `make demo-long`) for `--epochs` epochs at
each seed. Variants differ in the three settings this study is about (config/README.md):

- `max`: each filter's largest response in the patch (the stem as it was);
- `softmax`: `patch_pool: softmax`, every position of the patch gets gradient by its weight;
- `softmax+zero`: and `zero_init: true`, each block starts as the identity;
- `softmax+zero+nopos`: and `positions: none`, so a max pool cannot read the span's length off the
  sinusoids.

For each run it records the validation AUROC after each epoch and, at the end, two diagnoses: how
CTCF-like the most CTCF-like first-layer filter is (`ctcf_r`: Pearson r of the filter, centred at each
position, with MA0139.1's log-odds, at the best offset and strand; a filter that is the site scores
about 0.8 and above, random filters about 0.5), and how closely the validation scores follow the span's
length (`length_r`, Pearson; the long demo's labels do not depend on length, so a large |r| is a
shortcut learned). Writes a TSV (one row a run and epoch) and prints a table of the last epochs.

Usage:
    python benchmarks/studies/coarse_token_study.py [--seeds 0 1 2 3] [--epochs 4] [--patch 128] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from long_demo_run import RUN, results_dir, span_model_settings

from epiformer.data.batches import SpanBatches
from epiformer.data.shards import load_split
from epiformer.inference.trained_model import load_trained_model
from epiformer.model.configs import ModelConfig, TrainConfig
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar
from epiformer.training.train import train_model

VARIANTS = {
    "max": {},
    "softmax": {"patch_pool": "softmax"},
    "softmax+zero": {"patch_pool": "softmax", "zero_init": True},
    "softmax+zero+nopos": {"patch_pool": "softmax", "zero_init": True, "positions": "none"},
}
MIN_OVERLAP = 12  # bases of the site a filter must cover at an offset to be compared there


def ctcf_log_odds() -> np.ndarray:
    """[W, 4] CTCF's log2 odds against uniform bases, centred at each position (what a filter can express)."""
    log_odds = np.log2((read_jaspar(bundled_jaspar_path())["CTCF"].probabilities + 0.01) / 0.25)  # MA0139.1
    return log_odds - log_odds.mean(axis=1, keepdims=True)


def best_ctcf_r(filters: np.ndarray, site: np.ndarray) -> float:
    """The largest Pearson r between any filter [F, 4, k] (centred per position) and the site, over offsets and
    both strands (the reverse complement reverses positions and channels A, C, G, T)."""
    best = -1.0
    for weights in filters:
        weights = weights.T - weights.T.mean(axis=1, keepdims=True)  # (k, 4)
        for motif in (site, site[::-1, ::-1]):
            for offset in range(-(len(motif) - 1), len(weights)):
                start, end = max(0, offset), min(len(weights), offset + len(motif))
                if end - start >= MIN_OVERLAP:
                    a, b = weights[start:end].ravel(), motif[start - offset : end - offset].ravel()
                    best = max(best, float(np.corrcoef(a, b)[0, 1]))
    return best


def length_r(model_dir: Path, shards: Path, patch: int) -> float:
    """Pearson r of the trained model's validation scores (its best epoch's weights) with its spans' lengths."""
    model = load_trained_model(model_dir)[0]
    scores, lengths = [], []
    with torch.no_grad():
        for batch in SpanBatches(load_split(shards, "val"), 16384, patch):
            scores.append(model(span=batch["span"], segment=batch["segment"], span_valid=batch["span_valid"]))
            lengths.append(batch["span_valid"].sum(dim=1).float())
    return float(np.corrcoef(torch.cat(scores).numpy(), torch.cat(lengths).numpy())[0, 1])


def run(variant: str, seed: int, args, workdir: Path) -> pd.DataFrame:
    settings = {**span_model_settings(), "patch_size": args.patch, "stem": "conv_exp", "kernel_size": 19}
    settings.update(max_positions=-(-60_000 // args.patch))
    config = replace(ModelConfig(attention="linear", **settings), **VARIANTS[variant])
    train = TrainConfig(
        epochs=args.epochs,
        learning_rate=args.lr,
        max_tokens_per_batch=16384 * 4 // args.patch,  # the long demo's bases a step (16,384 tokens of 4 bp)
        threads=args.threads,
        device="cpu",
        seed=seed,
    )
    out = workdir / f"{variant}-{seed}"
    train_model(args.shards, config, train, out, workdir / f"{variant}-{seed}-checkpoint")
    log = pd.read_csv(out / "train_log.tsv", sep="\t")[["epoch", "val_auroc", "train_loss"]]
    weights = load_trained_model(out)[0].tokenizer.project.weight.detach().numpy()
    return log.assign(
        variant=variant,
        seed=seed,
        ctcf_r=best_ctcf_r(weights, ctcf_log_odds()),
        length_r=length_r(out, args.shards, args.patch),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=Path, default=results_dir(RUN) / "span_shards")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--patch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs/results/runs/demo_long/coarse_token_study.tsv"))
    args = parser.parse_args()
    if not args.shards.is_dir():
        raise SystemExit(f"{args.shards}: no span shards; run `make demo-long` first (or give --shards).")
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for variant in args.variants:
            for seed in args.seeds:
                rows.append(run(variant, seed, args, Path(workdir)))
                last = rows[-1].iloc[-1]
                print(f"{variant:20s} seed {seed}: validation AUROC {last.val_auroc:.3f}, ctcf_r {last.ctcf_r:.2f}, "
                      f"length_r {last.length_r:+.2f}", flush=True)  # fmt: skip
    table = pd.concat(rows, ignore_index=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, sep="\t", index=False)
    last = table[table.epoch == table.epoch.max()]
    print(last.pivot(index="variant", columns="seed", values="val_auroc").round(3).to_string())


if __name__ == "__main__":
    main()
