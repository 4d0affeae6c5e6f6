"""Whether the scale demo's span model reads its elements better at fine tokens: a study on validation pairs.

The scale demo's span model (config/demo_scale.yaml's `linear_span`) reads everything at 128 bp a token,
so each element window is two tokens and the partner grammar (which motif pairs with which) stays near
chance (docs/results/demo_scale.md). This study trains it with the package's trainer on the span shards
of a `make demo-scale` run, under the config's own training settings and token budget, once for each
`--element-patch` (0: the elements at 128 bp as the span; 4: `element_patch_size: 4`, each element also
read at 4 bp by filters of its own) and each seed, and reports the validation AUROC by epoch and where the
kept epoch loses AUROC (`long_demo_breakdown.breakdown`: the border, the grammar, activity). Validation pairs only:
the choice of the setting must not look at the test chromosome.

Each run takes the config's budget (six epochs: about 25 minutes on one or two threads). The workflow
trains on one thread; two threads sum in another order, so the models are close to, not bit for bit, its own.

Usage:
    python benchmarks/studies/element_tokens_study.py [--run runs/demo-scale] [--element-patch 0 4] [--seeds 0]
        [--threads 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from long_demo_breakdown import breakdown
from long_demo_run import results_dir, train_settings, truth_path

from epiformer.model.configs import ModelConfig, TrainConfig, architecture
from epiformer.training.train import train_model

SCALE_CONFIG = Path(__file__).resolve().parents[2] / "config" / "demo_scale.yaml"
CELL = "demo_scale"


def model_settings(element_patch: int) -> ModelConfig:
    """The shipped span model with `element_patch_size` set (0: off); it has no positions, so no max_positions."""
    entry = architecture(yaml.safe_load(SCALE_CONFIG.read_text())["models"]["linear_span"])
    return ModelConfig(**{**entry, "element_patch_size": element_patch})


def train_config(seed: int, threads: int) -> TrainConfig:
    """The scale demo's training settings as the workflow resolves them, with this seed and threads."""
    return TrainConfig(**{**train_settings(SCALE_CONFIG), "seed": seed, "threads": threads})


def one_run(run: Path, element_patch: int, seed: int, threads: int, workdir: Path) -> pd.DataFrame:
    """Validation AUROC by epoch, and the breakdown of the kept epoch's validation scores (the trainer keeps the
    epoch of best validation AUPRC)."""
    shards = results_dir(run, CELL) / "span_shards"
    out = workdir / f"p{element_patch}-s{seed}"
    train_model(
        shards, model_settings(element_patch), train_config(seed, threads), out, out.parent / f"{out.name}-ckpt"
    )
    log = pd.read_csv(out / "train_log.tsv", sep="\t")
    truth = pd.read_csv(truth_path(run, CELL), sep="\t").drop(columns="label")
    scores = pd.read_csv(out / "val_predictions.tsv", sep="\t").merge(truth, on="pair_id")
    kept = {key: round(value, 3) for key, value in breakdown(scores).items()}
    rows = log[["epoch", "val_auroc"]].assign(element_patch_size=element_patch, seed=seed)
    return rows.assign(**{f"kept_{key}": value for key, value in kept.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=Path("runs/demo-scale"))
    parser.add_argument("--element-patch", type=int, nargs="+", default=[0, 4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        table = pd.concat(
            one_run(args.run, patch, seed, args.threads, Path(workdir))
            for patch in args.element_patch
            for seed in args.seeds
        )
    if args.out:
        table.to_csv(args.out, sep="\t", index=False)
    last = table.groupby(["element_patch_size", "seed"]).last().reset_index()
    print(last.drop(columns="epoch").to_string(index=False))


if __name__ == "__main__":
    main()
