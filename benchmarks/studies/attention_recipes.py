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
score it on test. A killed sweep resumes: finished trainings are read back.

The grid crosses the values given, or with `--one-at-a-time` (a full grid costs the product of
the axes) sweeps the learning rates at the shipped weight decay and dropout first, then tries each
other weight decay and each other dropout on its own at each attention's best learning rate, and
chooses among all of them (a weight decay and a dropout that each help are not tried together).
Usage:

    EPIFORMER_DELTA_KERNEL=cpp python benchmarks/studies/attention_recipes.py --run runs/demo-long \\
        --learning-rates 0.001 0.002 0.004 0.008 --weight-decays 0.01 0.1 --dropouts 0 0.1 \\
        --one-at-a-time --parallel 2 --work /tmp/attention_recipes \\
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


def around_best(chosen: pd.DataFrame, weight_decays, dropouts) -> dict[str, list[dict]]:
    """Per attention, the recipes of `--one-at-a-time`'s second step: its chosen learning rate with each weight
    decay, then each dropout, other than the chosen row's own (one key changed at a time)."""
    plans = {}
    for row in chosen[chosen["chosen"]].itertuples():
        plans[row.attention] = [
            {"learning_rate": row.learning_rate, key: value}
            for key, values in (("weight_decay", weight_decays), ("dropout", dropouts))
            for value in values
            if value != getattr(row, key)
        ]
    return plans


def recipe_index(row: dict, recipes: list[dict]) -> int:
    """The position in `recipes` of the most specific recipe that `row` (a training's full recipe) matches: a
    recipe sets only the keys it names, so {learning_rate 4e-3} matches every row at that rate and
    {learning_rate 4e-3, weight_decay 0.1} the rows that also have that weight decay."""
    matches = [(len(recipe), -i) for i, recipe in enumerate(recipes) if all(row[k] == v for k, v in recipe.items())]
    return -max(matches)[1]


def choose(rows: list[dict], recipes: list[dict]) -> pd.DataFrame:
    """One row per (attention, recipe): seeds, mean validation AUROC, and `chosen` on each attention's best, the
    earlier of `recipes` (every recipe tried, in the order tried) on a tie."""
    table = pd.DataFrame(rows)
    keys = [key for key in RECIPE_KEYS if key in table]
    table["grid_order"] = [recipe_index(row, recipes) for row in rows]
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


def train_all(jobs: list, parallel: int) -> list[dict]:
    """train_seed over `jobs`, `parallel` at a time (a process each), each row printed as it comes."""
    rows = []
    with multiprocessing.get_context("spawn").Pool(parallel, maxtasksperchild=1) as pool:
        for row in pool.imap_unordered(train_seed, jobs):
            rows.append(row)
            recipe = ", ".join(f"{key} {row[key]:g}" for key in RECIPE_KEYS)
            print(f"{row['attention']} ({recipe}) seed {row['seed']}: validation AUROC {row['val_auroc']:.3f}, "
                  f"{row['epochs_trained']:.2f} epochs", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = training_parser(__doc__, "/tmp/attention_recipes")
    parser.add_argument("--attentions", nargs="+", default=ATTENTIONS)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0 .. N - 1 of each attention and recipe")
    parser.add_argument("--learning-rates", type=float, nargs="*", default=[], help="train.learning_rate values")
    parser.add_argument("--weight-decays", type=float, nargs="*", default=[], help="train.weight_decay values")
    parser.add_argument("--dropouts", type=float, nargs="*", default=[], help="the model's dropout values")
    parser.add_argument(
        "--one-at-a-time", action="store_true", help="learning rates first, then each other value around the best"
    )
    args = parser.parse_args()
    if args.max_minutes is not None:
        parser.error("a recipe sweep trains on the recipe's token budget, the same for every attention: no minutes")

    def jobs(plans: dict[str, list[dict]]) -> list:  # attentions interleaved: a busy machine slows them alike
        per_attention = [
            sweep_jobs([name], plan, args.seeds, args.run, args.work, args.device) for name, plan in plans.items()
        ]
        return [job for jobs_at in itertools.zip_longest(*per_attention) for job in jobs_at if job]

    if not args.one_at_a_time:
        recipes = grid(args.learning_rates, args.weight_decays, args.dropouts)
        table = choose(train_all(jobs(dict.fromkeys(args.attentions, recipes)), args.parallel), recipes)
    else:
        recipes = grid(args.learning_rates, [], [])
        rows = train_all(jobs(dict.fromkeys(args.attentions, recipes)), args.parallel)
        plans = around_best(choose(rows, recipes), args.weight_decays, args.dropouts)
        rows += train_all(jobs(plans), args.parallel)
        recipes += [recipe for plan in plans.values() for recipe in plan if recipe not in recipes]
        table = choose(rows, recipes)
    print(table.to_string(index=False, float_format="%.3f"))
    save_table(table, args.out)


if __name__ == "__main__":
    main()
