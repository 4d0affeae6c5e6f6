"""The seed lottery: how often one seed of the long demo's span model finds the insulator, and an ensemble of 3.

Trains `models.linear_span` of config/demo_long.yaml with the shipped recipe (its `train:`
block over config/config.yaml's, time budget included) for seeds 0 .. N + 1 on the span
shards of a `make demo-long` run, outside the workflow, `--parallel` trainings at a time (one
thread each, so each has a core: the time budget then buys what it buys in the workflow on
an idle machine), and scores each on the test split. Then, for each base seed s of 0 .. N - 1:

- single: seed s's test AUROC; *found* when it is within 0.05 of the oracle AUROC (the
  generator's true probabilities on the same test pairs), the issue's bar; a seed that misses
  the insulator sits near the element ceiling (the best score the two windows allow);
- ensemble of 3: the mean probability of seeds s, s + 1, s + 2, what `train.replicates: 3`
  with `train.seed: s` trains.

Each seed's validation AUROC by epoch and the epochs it reached are written too, to look for
the cause of a miss. A killed run resumes: finished seeds are read back, a seed cut short
resumes from its checkpoint. Usage:

    python benchmarks/studies/seed_lottery.py --run runs/demo-long --seeds 10 --parallel 2 \\
        --work /tmp/seed_lottery --out docs/results/runs/demo_long/seed_lottery.tsv
"""

from __future__ import annotations

import argparse
import multiprocessing
from pathlib import Path

import pandas as pd
import yaml
from long_demo_run import LONG_DEMO_CONFIG, results_dir, span_model_settings, train_settings, truth_path
from sklearn.metrics import roc_auc_score

from epiformer.io.metrics_file import metrics_path, read_metrics
from epiformer.io.model_description import description_path, read_description

FOUND_WITHIN = 0.05  # of the oracle AUROC: the bar for "found the insulator"
ENSEMBLE = 3


def recipe() -> tuple[dict, dict, int]:
    """The span model's settings, the train: block and windows.max_span, as the workflow resolves them."""
    base = yaml.safe_load((LONG_DEMO_CONFIG.parent / "config.yaml").read_text())
    overlay = yaml.safe_load(LONG_DEMO_CONFIG.read_text())
    train = train_settings(LONG_DEMO_CONFIG)
    model = {"attention": "linear", **span_model_settings()}
    return model, train, {**base["windows"], **overlay["windows"]}["max_span"]


RECIPE_KEYS = {"learning_rate": "train", "weight_decay": "train", "dropout": "model"}  # what a sweep may change


def train_seed(job: tuple) -> dict:
    """Train and score one seed with one attention (in a worker process, one thread, on `device`); returns its row.

    `job`: (seed, run, work, max_minutes, attention, device, recipe, score_test): `recipe` sets RECIPE_KEYS over
    the shipped recipe ({}: as shipped); a recipe sweep reads validation only (the kept epoch's validation AUROC,
    `val_auroc`) and leaves the test split unscored (`score_test` False)."""
    import torch

    from epiformer.evaluation.evaluate import evaluate_model
    from epiformer.model.configs import ModelConfig, TrainConfig, with_span_positions
    from epiformer.training.train import train_model

    seed, run, work, max_minutes, attention, device, overrides, score_test = job
    torch.set_num_threads(1)
    model, train, max_span = recipe()
    model["attention"] = attention
    settings = {"train": train, "model": model}  # RECIPE_KEYS' blocks
    for key, value in overrides.items():
        settings[RECIPE_KEYS[key]][key] = value
    if max_minutes is not None:
        train["max_minutes"] = max_minutes
    folder = Path(work) / f"seed_{seed}"
    shards = results_dir(Path(run)) / "span_shards"
    if not description_path(folder).is_file():
        config = TrainConfig(**{**train, "seed": seed, "threads": 1, "device": device, "replicates": 1})
        train_model(str(shards), ModelConfig(**with_span_positions(model, max_span)), config, folder, folder / "ckpt")
    if score_test and not metrics_path(folder).is_file():
        evaluate_model(folder, shards, folder / "predictions.tsv", metrics_path(folder), resamples=10, device=device)
    description = read_description(folder)
    log = pd.read_csv(folder / "train_log.tsv", sep="\t")
    kept = log.loc[log["epoch"] == description["best_epoch"], "val_auroc"]
    return {
        "seed": seed,
        "attention": attention,
        **{key: settings[block].get(key) for key, block in RECIPE_KEYS.items()},
        "val_auroc": float(kept.iloc[-1]) if len(kept) else float("nan"),
        "auroc": read_metrics(metrics_path(folder))["auroc"] if score_test else float("nan"),
        "epochs_trained": description["epochs_trained"],
        "best_epoch": description["best_epoch"],
        "peak_memory_mb": description["peak_memory_mb"],
        "tokens_per_s": description.get("tokens_per_s", float("nan")),
        "val_auroc_by_epoch": ";".join(f"{value:.3f}" for value in log["val_auroc"]),
    }


def oracle_and_ceiling(run: Path, predictions: Path) -> tuple[float, float]:
    """The generator's AUROC on the test pairs (the oracle) and the element-only ceiling."""
    truth = pd.read_csv(truth_path(run), sep="\t")
    test = pd.read_csv(predictions, sep="\t").merge(truth[["pair_id", "p_interact", "p_elements"]], on="pair_id")
    return roc_auc_score(test["label"], test["p_interact"]), roc_auc_score(test["label"], test["p_elements"])


def ensemble_predictions(work: Path, seeds) -> pd.DataFrame:
    """These seeds' test predictions as one ensemble, as the workflow scores replicates (evaluate.mean_probability)."""
    from epiformer.evaluation.evaluate import mean_probability

    return mean_probability([pd.read_csv(work / f"seed_{seed}" / "predictions.tsv", sep="\t") for seed in seeds])


def ensemble_auroc(work: Path, seeds: list[int]) -> float:
    """Test AUROC of these seeds' ensemble."""
    ensemble = ensemble_predictions(work, seeds)
    return float(roc_auc_score(ensemble["label"], ensemble["score"]))


def lottery_table(rows: list[dict], work: Path, run: Path, bases: int) -> pd.DataFrame:
    """One row per base seed: single and ensemble AUROC, whether each found the insulator."""
    oracle, ceiling = oracle_and_ceiling(run, work / f"seed_{rows[0]['seed']}" / "predictions.tsv")
    by_seed = {row["seed"]: row for row in rows}
    table = []
    for base in range(bases):
        single = by_seed[base]
        ensemble = ensemble_auroc(work, list(range(base, base + ENSEMBLE)))
        table.append(
            {
                "base_seed": base,
                "single_auroc": single["auroc"],
                "single_found": single["auroc"] >= oracle - FOUND_WITHIN,
                f"ensemble{ENSEMBLE}_auroc": ensemble,
                f"ensemble{ENSEMBLE}_found": ensemble >= oracle - FOUND_WITHIN,
                "oracle_auroc": oracle,
                "element_ceiling_auroc": ceiling,
                "epochs_trained": single["epochs_trained"],
                "best_epoch": single["best_epoch"],
                "val_auroc_by_epoch": single["val_auroc_by_epoch"],
            }
        )
    return pd.DataFrame(table)


def save_table(table: pd.DataFrame, out: Path | None) -> None:
    """Write a study's table to `out` (TSV, 4 decimals), if given."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, sep="\t", index=False, float_format="%.4f")


def training_parser(description: str, work: str) -> argparse.ArgumentParser:
    """The options of a script that trains seeds of the span model with train_seed: run, work, parallel, budget."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=Path("runs/demo-long"), help="a `make demo-long` run folder")
    parser.add_argument("--parallel", type=int, default=2, help="trainings at a time, one thread each")
    parser.add_argument("--work", type=Path, default=Path(work), help="where the models go")
    parser.add_argument("--out", type=Path, help="TSV of the table (default: print only)")
    parser.add_argument(
        "--max-minutes", type=float, help="override the recipe's time budget (0: none, the recipe's epochs each)"
    )
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: train and score on the GPU (with --parallel 1)")
    return parser


def main() -> None:
    parser = training_parser(__doc__, "/tmp/seed_lottery")
    parser.add_argument("--seeds", type=int, default=10, help="base seeds (trains this many + 2)")
    args = parser.parse_args()
    seeds = list(range(args.seeds + ENSEMBLE - 1))
    jobs = [(seed, str(args.run), str(args.work), args.max_minutes, "linear", args.device, {}, True) for seed in seeds]
    with multiprocessing.get_context("spawn").Pool(args.parallel) as pool:
        rows = []
        for row in pool.imap_unordered(train_seed, jobs):
            rows.append(row)
            print(f"seed {row['seed']}: test AUROC {row['auroc']:.3f}, {row['epochs_trained']:.1f} epochs", flush=True)
    table = lottery_table(rows, args.work, args.run, args.seeds)
    print(table.drop(columns="val_auroc_by_epoch").to_string(index=False, float_format="%.3f"))
    found = table["single_found"].sum(), table[f"ensemble{ENSEMBLE}_found"].sum()
    print(f"Within {FOUND_WITHIN} of the oracle: single seed {found[0]} of {args.seeds}, ensemble of 3 {found[1]}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, sep="\t", index=False, float_format="%.4f")


if __name__ == "__main__":
    main()
