"""Which part of a seed makes the long demo's span model miss the insulator: swap them between seeds.

A seed sets the initial weights and each epoch's batch order (training/train.py,
"Randomness"). This trains `models.linear_span` of config/demo_long.yaml with the shipped
recipe (its learning-rate schedule over `train.epochs`, no time budget) for the first
`--epochs` epochs, with the initial weights of seed `--init`, the batch order of seed
`--order`, and optionally some parameters taken from seed `--part-from`'s initial weights
(`--part tokenizer`: the stem's filters; `--part blocks,norm,head`: everything after it) or
the stem's initial filters scaled (`--stem-scale`). It prints the validation AUROC by epoch:
on the reference machine every seed that found the insulator was above 0.79 after epoch 2
but one (seed 6, 0.738), and the seeds that never found it below 0.72
(docs/results/demo_long.md, "Why a seed misses"). Epochs, not minutes, so that a busy machine
changes the time a run takes, not what it learns. Usage:

    python benchmarks/studies/seed_swap.py --run runs/demo-long --init 9 --order 0
    python benchmarks/studies/seed_swap.py --run runs/demo-long --init 9 --order 9 --part tokenizer --part-from 0

`--filters WORK` instead prints, for each seed model in WORK (seed_lottery.py's `--work`), how
close its stem's best filter comes to CTCF (Pearson correlation of the filter with JASPAR
MA0139.1's log-odds matrix, either strand) before and after training.

The swap happens where the training loop builds its model: it replaces `EPITransformer` of
epiformer.training.train, for this process only, by a builder that loads the chosen seeds'
initial weights; `train_model`'s `on_epoch` reads each epoch's validation AUROC and ends the
run after the last epoch asked for. The batch order stays the training loop's own, seeded by
`train.seed`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from long_demo_run import results_dir
from safetensors.torch import load_file
from seed_lottery import recipe

import epiformer.training.train as training
from epiformer.io.metrics_file import metrics_path, read_metrics
from epiformer.io.model_description import read_description
from epiformer.model.configs import ModelConfig, TrainConfig, with_span_positions
from epiformer.model.transformer import EPITransformer
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar

# The stem; the blocks, final norm and head (the segment embedding stays the --init seed's).
PARTS = {"tokenizer": ("tokenizer.",), "blocks,norm,head": ("blocks.", "norm.", "head.")}


def initial_weights(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """The parameters a training run of `seed` starts from."""
    state = torch.random.get_rng_state()
    training.seed_everything(seed)
    model = EPITransformer(config)
    torch.random.set_rng_state(state)
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def patched_model(init: int, part: str | None, part_from: int | None, stem_scale: float):
    """The training loop's model class, built from seed `init` with `part` from `part_from` and the stem scaled."""

    def build_model(config: ModelConfig):
        model = EPITransformer(config)
        weights = initial_weights(config, init)
        if part is not None:
            donor = initial_weights(config, part_from)
            weights.update({name: value for name, value in donor.items() if name.startswith(PARTS[part])})
        weights["tokenizer.project.weight"] = weights["tokenizer.project.weight"] * stem_scale
        model.load_state_dict(weights)
        return model

    return build_model


def validation_by_epoch(run: Path, init: int, order: int, epochs: int, **swap) -> list[float]:
    """Validation AUROC after each of the first `epochs` epochs of a run with these initial weights and order."""
    torch.set_num_threads(1)
    model, train, max_span = recipe()
    train.update(max_minutes=0, seed=order, threads=1, device="cpu", replicates=1)
    training.EPITransformer = patched_model(init, **swap)
    history = []

    def record(row: dict) -> bool:
        history.append(row["val_auroc"])
        return row["epoch"] >= epochs  # the rest of the schedule is not needed

    with tempfile.TemporaryDirectory() as folder:
        training.train_model(
            str(results_dir(run) / "span_shards"),
            ModelConfig(**with_span_positions(model, max_span)),
            TrainConfig(**train),
            Path(folder),
            Path(folder) / "ckpt",
            on_epoch=record,
        )
    return history


def best_ctcf_correlation(filters: torch.Tensor) -> float:
    """The largest Pearson correlation of any stem filter [D, 4, k] with CTCF's log-odds matrix, either strand."""
    ctcf = read_jaspar(bundled_jaspar_path())["CTCF"]
    log_odds = np.log2(ctcf.probabilities / 0.25)  # (k, 4)
    best = -1.0
    for matrix in (log_odds, log_odds[::-1, ::-1]):  # the reverse complement: bases reversed, A<->T, C<->G
        target = (matrix - matrix.mean(axis=1, keepdims=True)).ravel()
        for weights in filters.numpy().transpose(0, 2, 1):  # (k, 4) each
            centred = (weights - weights.mean(axis=1, keepdims=True)).ravel()
            best = max(best, float(centred @ target / np.linalg.norm(centred) / np.linalg.norm(target)))
    return best


def filter_similarity(work: Path) -> None:
    """Print each lottery seed's best filter-CTCF correlation before and after training, with its test AUROC."""
    for folder in sorted(work.glob("seed_*"), key=lambda path: int(path.name.split("_")[1])):
        seed = int(folder.name.split("_")[1])
        description = read_description(folder)
        config = ModelConfig(**description["model"])
        before = initial_weights(config, seed)["tokenizer.project.weight"]
        after = load_file(str(folder / "model.safetensors"))["tokenizer.project.weight"]
        auroc = read_metrics(metrics_path(folder))["auroc"]
        print(
            f"seed {seed}: test AUROC {auroc:.3f}, best filter-CTCF correlation "
            f"{best_ctcf_correlation(before):.2f} before training, {best_ctcf_correlation(after):.2f} after"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=Path("runs/demo-long"), help="a `make demo-long` run folder")
    parser.add_argument("--init", type=int, help="the seed of the initial weights")
    parser.add_argument("--order", type=int, help="the seed of the batch order")
    parser.add_argument("--filters", type=Path, help="seed_lottery.py's --work: compare its models' filters with CTCF")
    parser.add_argument("--part", choices=sorted(PARTS), help="parameters taken from --part-from's initial weights")
    parser.add_argument("--part-from", type=int, help="the seed --part comes from")
    parser.add_argument("--stem-scale", type=float, default=1.0, help="scale the stem's initial filters")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if args.filters:
        filter_similarity(args.filters)
        return
    if args.init is None or args.order is None:
        parser.error("give --init and --order (or --filters)")
    if (args.part is None) != (args.part_from is None):
        parser.error("--part and --part-from go together")
    history = validation_by_epoch(
        args.run,
        args.init,
        args.order,
        args.epochs,
        part=args.part,
        part_from=args.part_from,
        stem_scale=args.stem_scale,
    )
    swap = f", {args.part} of seed {args.part_from}" if args.part else ""
    scale = f", stem filters x{args.stem_scale:g}" if args.stem_scale != 1 else ""
    print(
        f"init {args.init}, order {args.order}{swap}{scale}: validation AUROC by epoch "
        + " ".join(f"{value:.3f}" for value in history)
    )


if __name__ == "__main__":
    main()
