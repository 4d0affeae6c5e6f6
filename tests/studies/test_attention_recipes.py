"""benchmarks/studies/attention_recipes.py and attention_seeds.py --recipes: each attention's recipe chosen on
validation alone, and the chosen one trained over seeds (issue 40, item 3)."""

import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "studies"))  # the studies import their helpers by module name
from attention_recipes import around_best, choose, grid, recipe_folder, sweep_jobs  # noqa: E402
from attention_seeds import chosen_recipes, jobs  # noqa: E402


def row(attention, learning_rate, seed, val_auroc, test_auroc=float("nan"), weight_decay=0.01, dropout=0.0):
    return {
        "attention": attention,
        "seed": seed,
        "learning_rate": learning_rate,
        "weight_decay": weight_decay,
        "dropout": dropout,
        "val_auroc": val_auroc,
        "auroc": test_auroc,
        "epochs_trained": 6.0,
    }


def test_the_grid_crosses_only_the_axes_given_in_their_order():
    assert grid([1e-3, 2e-3], [], [0.0, 0.1]) == [
        {"learning_rate": 1e-3, "dropout": 0.0},
        {"learning_rate": 1e-3, "dropout": 0.1},
        {"learning_rate": 2e-3, "dropout": 0.0},
        {"learning_rate": 2e-3, "dropout": 0.1},
    ]
    assert grid([], [], []) == [{}]  # the shipped recipe alone


def test_each_attention_gets_the_recipe_of_its_best_mean_validation_auroc_whatever_the_test_says():
    recipes = grid([1e-3, 2e-3], [], [])
    rows = [
        row("linear", 1e-3, 0, 0.80, test_auroc=0.99),  # the best on test: no say in the choice
        row("linear", 1e-3, 1, 0.70, test_auroc=0.99),
        row("linear", 2e-3, 0, 0.78),
        row("linear", 2e-3, 1, 0.76),
        row("deltanet", 2e-3, 0, 0.70),
        row("deltanet", 1e-3, 0, 0.70),  # a tie: the earlier recipe in the grid wins
    ]
    table = choose(rows, recipes)
    chosen = table[table["chosen"]].set_index("attention")
    assert chosen.loc["linear", "learning_rate"] == 2e-3 and chosen.loc["linear", "mean_val_auroc"] == 0.77
    assert chosen.loc["deltanet", "learning_rate"] == 1e-3
    assert list(table["attention"]) == ["linear", "linear", "deltanet", "deltanet"]  # ATTENTIONS' order
    assert table.loc[(table["attention"] == "linear") & (table["learning_rate"] == 1e-3), "val_aurocs"].item() == (
        "0.8000;0.7000"
    )


def test_the_sweep_never_scores_test_and_the_seeds_train_each_attentions_chosen_recipe(tmp_path):
    recipes = grid([1e-3, 2e-3], [], [])
    sweep = sweep_jobs(["linear", "deltanet"], recipes, 1, tmp_path / "run", tmp_path / "work", "cpu")
    assert len(sweep) == 4 and not any(job[-1] for job in sweep)  # validation only
    assert {job[2] for job in sweep} == {
        str(recipe_folder(tmp_path / "work", attention, recipe)) for attention in ("linear", "deltanet")
        for recipe in recipes
    }  # fmt: skip
    rows = [row("linear", 1e-3, 0, 0.6), row("linear", 2e-3, 0, 0.7), row("deltanet", 1e-3, 0, 0.7)]
    rows.append(row("deltanet", 2e-3, 0, 0.6))
    choose(rows, recipes).to_csv(tmp_path / "recipes.tsv", sep="\t", index=False)
    chosen = chosen_recipes(tmp_path / "recipes.tsv", ["linear", "deltanet"])
    assert chosen == {
        "linear": {"learning_rate": 2e-3, "weight_decay": 0.01, "dropout": 0.0},
        "deltanet": {"learning_rate": 1e-3, "weight_decay": 0.01, "dropout": 0.0},
    }
    seeds = jobs(["linear", "deltanet"], 2, tmp_path / "run", tmp_path / "seeds", None, "cpu", chosen)
    assert [(job[0], job[4], job[6]["learning_rate"], job[7]) for job in seeds] == [
        (0, "linear", 2e-3, True),
        (0, "deltanet", 1e-3, True),
        (1, "linear", 2e-3, True),
        (1, "deltanet", 1e-3, True),
    ]
    with pytest.raises(SystemExit, match="no chosen recipe for gated_deltanet"):
        chosen_recipes(tmp_path / "recipes.tsv", ["linear", "gated_deltanet"])


def test_one_at_a_time_tries_each_other_value_at_each_attentions_best_rate_and_chooses_among_all():
    rates = grid([1e-3, 2e-3], [], [])
    first = [row("linear", 1e-3, 0, 0.8), row("linear", 2e-3, 0, 0.7), row("deltanet", 1e-3, 0, 0.6)]
    first.append(row("deltanet", 2e-3, 0, 0.7))
    plans = around_best(choose(first, rates), [0.01, 0.1], [0.0, 0.2])
    assert plans == {  # the shipped values (0.01, 0.0) are the best rate's own row: not trained again
        "linear": [{"learning_rate": 1e-3, "weight_decay": 0.1}, {"learning_rate": 1e-3, "dropout": 0.2}],
        "deltanet": [{"learning_rate": 2e-3, "weight_decay": 0.1}, {"learning_rate": 2e-3, "dropout": 0.2}],
    }
    second = [
        row("linear", 1e-3, 0, 0.75, weight_decay=0.1),
        row("linear", 1e-3, 0, 0.79, dropout=0.2),
        row("deltanet", 2e-3, 0, 0.72, weight_decay=0.1),  # deltanet's best: more weight decay
        row("deltanet", 2e-3, 0, 0.65, dropout=0.2),
    ]
    tried = rates + [recipe for plan in plans.values() for recipe in plan]
    table = choose(first + second, tried)
    assert len(table) == 8  # every training its own row: a rate's row is not merged with its variants
    chosen = table[table["chosen"]].set_index("attention")
    assert chosen.loc["linear", ["learning_rate", "weight_decay", "dropout"]].tolist() == [1e-3, 0.01, 0.0]
    assert chosen.loc["deltanet", ["learning_rate", "weight_decay", "dropout"]].tolist() == [2e-3, 0.1, 0.0]
    linear = table[table["attention"] == "linear"]
    assert linear["mean_val_auroc"].tolist() == [0.8, 0.7, 0.75, 0.79]  # in the order tried


def test_each_attention_is_set_against_m7s_ensemble_with_a_promoter_interval_and_the_seed_spread(tmp_path):
    from attention_seeds import against_reference
    from long_demo_run import results_dir

    rng = np.random.default_rng(0)
    pairs = 400
    labels = rng.integers(0, 2, pairs)
    promoter = np.arange(pairs) // 4  # four pairs a promoter
    windows = pd.DataFrame({"pair_id": [f"p{i}" for i in range(pairs)], "promoter_chrom": "chr1"})
    windows["promoter_start"], windows["promoter_end"] = promoter * 1000, promoter * 1000 + 500
    results_dir(tmp_path / "run").mkdir(parents=True)
    windows.to_csv(results_dir(tmp_path / "run") / "windows.tsv", sep="\t", index=False)
    separation = {"linear": 0.5, "deltanet": 3.0}  # deltanet reads the label far better: above M7 beyond doubt
    rows = []
    for attention, strength in separation.items():
        for seed in range(3):
            score = 1 / (1 + np.exp(-(strength * (labels - 0.5) + rng.normal(0, 1, pairs))))
            folder = tmp_path / "work" / attention / f"seed_{seed}"
            folder.mkdir(parents=True)
            pd.DataFrame({"pair_id": windows["pair_id"], "label": labels, "score": score}).to_csv(
                folder / "predictions.tsv", sep="\t", index=False
            )
            rows.append({"attention": attention, "seed": seed, "auroc": roc_auc_score(labels, score)})
    table = against_reference(pd.DataFrame(rows), tmp_path / "run", tmp_path / "work")
    delta = table[table["attention"] == "deltanet"].iloc[0]
    assert 0 < delta["vs_m7_lo"] < delta["vs_m7"] < delta["vs_m7_hi"] and delta["vs_m7_seeds"] == "every seed above"
    scores = [
        pd.read_csv(tmp_path / "work" / "deltanet" / f"seed_{s}" / "predictions.tsv", sep="\t")["score"]
        for s in range(3)
    ]
    assert delta["ensemble_auroc"] == pytest.approx(roc_auc_score(labels, np.mean(scores, axis=0)))
    assert table.loc[table["attention"] == "linear", "vs_m7"].isna().all()  # M7 is the reference
