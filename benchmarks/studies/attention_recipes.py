"""Each attention's own recipe, chosen on the long demo's validation split only (issue 40, item 3).

Trains `models.linear_span` of config/demo_long.yaml with each `--attentions` entry over a grid of
recipes (`--learning-rates` x `--weight-decays` x `--dropouts`, each over the shipped recipe:
config/demo_long.yaml's `train:` block, its token budget included, so every attention sees the same
tokens, epoch for epoch) for seeds 0 .. N - 1, on the span shards of a `make demo-long` run, outside
the workflow (seed_lottery.train_seed: one process per training, one thread each, `--parallel` at a
time). Each training's figure is the validation AUROC of the epoch it kept (best validation AUPRC);
the test split is never scored. Per attention, the recipe with the highest mean validation AUROC
over the seeds is chosen (the earlier in the grid on a tie) and marked `chosen` in `--out`, which
attention_seeds.py then reads (`--recipes`) to train each attention's chosen recipe over seeds and
score it on test. A killed sweep resumes: finished trainings are read back. Usage:

    EPIFORMER_DELTA_KERNEL=cpp python benchmarks/studies/attention_recipes.py --run runs/demo-long \\
        --learning-rates 0.001 0.002 0.004 --parallel 2 --work /tmp/attention_recipes \\
        --out docs/results/runs/attentions/attention_recipes.tsv
"""

from __future__ import annotations

import itertools
import multiprocessing
from pathlib import Path

import pandas as pd
from attention_seeds import ATTENTIONS, attention_order
from seed_lottery import RECIPE_KEYS, save_table, train_seed, training_parser


def recipe_folder(work: Path, attention: str, recipe: dict) -> Path:
    """Where one attention's trainings under one recipe go: a folder per attention and recipe."""
    return work / attention / "_".join(f"{key}{value:g}" for key, value in recipe.items())


def grid(learning_rates, weight_decays, dropouts) -> list[dict]:
    """The recipes to try, in the order given (the first wins a tie): only the keys given a value."""
    axes = {"learning_rate": learning_rates, "weight_decay": weight_decays, "dropout": dropouts}
    given = {key: values for key, values in axes.items() if values}
    return [dict(zip(given, values)) for values in itertools.product(*given.values())] or [{}]


def sweep_jobs(attentions: list[str], recipes: list[dict], seeds: int, run: Path, work: Path, device: str) -> list:
    """train_seed's jobs, validation only, seed by seed with attentions and recipes interleaved (a busy machine
    then slows them alike)."""
    return [
        (seed, str(run), str(recipe_folder(work, attention, recipe)), None, attention, device, recipe, False)
        for seed in range(seeds)
        for recipe in recipes
        for attention in attentions
    ]


def choose(rows: list[dict], recipes: list[dict]) -> pd.DataFrame:
    """One row per (attention, recipe): seeds, mean validation AUROC, and `chosen` on each attention's best."""
    table = pd.DataFrame(rows)
    keys = [key for key in RECIPE_KEYS if key in table]
    table["grid_order"] = [
        next(i for i, recipe in enumerate(recipes) if all(row[k] == v for k, v in recipe.items())) for row in rows
    ]
    per_recipe = table.groupby(["attention", "grid_order"], sort=False).agg(
        **{key: (key, "first") for key in keys},
        seeds=("seed", "size"),
        mean_val_auroc=("val_auroc", "mean"),
        val_aurocs=("val_auroc", lambda values: ";".join(f"{value:.4f}" for value in values)),
        median_epochs=("epochs_trained", "median"),
    )
    per_recipe = per_recipe.reset_index().sort_values(["attention", "grid_order"], key=attention_order)
    best = per_recipe.sort_values(["mean_val_auroc", "grid_order"], ascending=[False, True])
    chosen = best.groupby("attention", sort=False).head(1).index
    per_recipe["chosen"] = per_recipe.index.isin(chosen)
    return per_recipe.drop(columns="grid_order").reset_index(drop=True)


def main() -> None:
    parser = training_parser(__doc__, "/tmp/attention_recipes")
    parser.add_argument("--attentions", nargs="+", default=ATTENTIONS)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0 .. N - 1 of each attention and recipe")
    parser.add_argument("--learning-rates", type=float, nargs="*", default=[], help="train.learning_rate values")
    parser.add_argument("--weight-decays", type=float, nargs="*", default=[], help="train.weight_decay values")
    parser.add_argument("--dropouts", type=float, nargs="*", default=[], help="the model's dropout values")
    args = parser.parse_args()
    if args.max_minutes is not None:
        parser.error("a recipe sweep trains on the recipe's token budget, the same for every attention: no minutes")
    recipes = grid(args.learning_rates, args.weight_decays, args.dropouts)
    rows = []
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.parallel, maxtasksperchild=1) as pool:
        for row in pool.imap_unordered(
            train_seed, sweep_jobs(args.attentions, recipes, args.seeds, args.run, args.work, args.device)
        ):
            rows.append(row)
            recipe = ", ".join(f"{key} {row[key]:g}" for key in RECIPE_KEYS)
            print(f"{row['attention']} ({recipe}) seed {row['seed']}: validation AUROC {row['val_auroc']:.3f}, "
                  f"{row['epochs_trained']:.2f} epochs", flush=True)  # fmt: skip
    table = choose(rows, recipes)
    print(table.to_string(index=False, float_format="%.3f"))
    save_table(table, args.out)


if __name__ == "__main__":
    main()
