"""A real tiny Snakemake run with a pooled model and a distance-aware model, the way a user configures them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.helpers import (
    REPO,
    TINY_MODEL,
    assert_figure,
    epiformer_predict,
    require_bedtools,
    run_workflow,
    snakemake,
    tiny_config,
    write_config,
)

POOLED = {
    "linear": {"attention": "linear", **TINY_MODEL},
    "linear_distance": {"attention": "linear", **TINY_MODEL, "distance": True},
    "linear_pooled": {"attention": "linear", **TINY_MODEL, "pooled": True},
    "linear_pooled_distance": {"attention": "linear", **TINY_MODEL, "pooled": True, "distance": True},
}
CELLS = ("demo_a", "demo_b")


def pooled_config(models: dict) -> dict:
    """tiny_config() with `models` and only the distance baseline."""
    config = tiny_config()
    config["models"] = models
    config["baselines"]["names"] = ["distance"]
    return config


@pytest.fixture(scope="module")
def pooled_run(tmp_path_factory):
    require_bedtools()
    folder = tmp_path_factory.mktemp("pooled")
    write_config(folder, pooled_config(POOLED))
    run_workflow(
        folder, "-s", str(REPO / "Snakefile"), "results/summary.tsv", "results/plots/pooled/linear_pooled.training.png"
    )
    return folder


def test_a_pooled_model_is_trained_once_and_tested_on_each_cell_line(pooled_run):
    results = pooled_run / "results"
    for name in ("linear_pooled", "linear_pooled_distance"):
        description = json.loads((results / "pooled" / name / "model.json").read_text())
        assert description["model"]["distance"] == name.endswith("distance")
        assert not (results / "demo_a" / name / "model.safetensors").exists()
        for cell in CELLS:
            own = set(pd.read_csv(results / cell / "linear" / "predictions.tsv", sep="\t")["pair_id"])
            pooled = pd.read_csv(results / cell / name / "predictions.tsv", sep="\t")
            assert set(pooled["pair_id"]) == own  # the cell line's own test pairs
    log = pd.read_csv(results / "pooled" / "linear_pooled" / "train_log.tsv", sep="\t")
    assert len(log) == 1 and log["val_auroc"].between(0, 1).all()
    assert_figure(results / "plots" / "pooled" / "linear_pooled.training.png")


def test_the_summary_shows_pooled_and_distance_models_beside_the_sequence_only_ones(pooled_run):
    summary = pd.read_csv(pooled_run / "results" / "summary.tsv", sep="\t")
    assert set(summary["model"]) == set(POOLED) | {"distance", "distance_pooled"}
    models = summary[summary["kind"] == "transformer"]
    assert set(models["attention"]) == {"linear"} and len(models) == len(POOLED) * len(CELLS)
    pooled = models[models["model"] == "linear_pooled"]
    assert pooled["train_seconds"].nunique() == 1  # one training, reported for both cell lines
    description = json.loads((pooled_run / "results" / "pooled" / "linear_pooled" / "model.json").read_text())
    assert description["trained_on"] == [f"results/{cell}/shards" for cell in CELLS]
    assert {"auroc_diff_distance", "auroc_diff_distance_lo", "auroc_diff_distance_hi"} <= set(summary.columns)


def test_beside_pooled_models_each_baseline_is_also_fitted_once_on_every_cell_line(pooled_run):
    """The pooled distance baseline is one function of distance for both cell lines, fitted on both train splits,
    and the pooled models meet it in the paired comparison."""
    results = pooled_run / "results"
    scored, train_pairs = [], 0
    for cell in CELLS:
        windows = pd.read_csv(results / cell / "windows.tsv", sep="\t")
        train_pairs += int((windows["split"] == "train").sum())
        predictions = pd.read_csv(results / cell / "distance_pooled" / "predictions.tsv", sep="\t")
        assert set(predictions["pair_id"]) == set(windows.loc[windows["split"] == "test", "pair_id"])
        scored.append(predictions.merge(windows[["pair_id", "distance"]], on="pair_id"))
        described = json.loads((results / cell / "distance_pooled" / "metrics.json").read_text())["baseline"]
        assert described["pooled"] is True and described["cell_lines"] == len(CELLS)
    assert described["train_pairs"] == train_pairs
    both = pd.concat(scored).sort_values("distance")
    steps = np.diff(both["score"].to_numpy())
    assert (steps <= 1e-12).all() or (steps >= -1e-12).all()  # one monotone function across both cell lines
    paired = pd.read_csv(results / "paired_comparison.tsv", sep="\t")
    assert {"distance", "distance_pooled"} <= set(paired.loc[paired["model"] == "linear_pooled", "baseline"])


def test_epiformer_summary_of_some_models_equals_the_workflows_rows_for_them(pooled_run, tmp_path):
    # As `make real-random` runs some of the config's models: the summary of what the folder holds.
    results = tmp_path / "results"
    for cell in CELLS:
        for name in ("linear_pooled_distance", "distance", "distance_pooled"):
            shutil.copytree(pooled_run / "results" / cell / name, results / cell / name)
        for name in ("windows_stats.json", "windows.tsv"):  # the drop counts; the distances of the test pairs
            shutil.copy(pooled_run / "results" / cell / name, results / cell)
    shutil.copytree(
        pooled_run / "results" / "pooled" / "linear_pooled_distance", results / "pooled" / "linear_pooled_distance"
    )
    shutil.copy(pooled_run / "results" / "selection.tsv", results)  # the run's choice: the command marks it too
    bootstrap = str(pooled_config(POOLED)["evaluate"]["bootstrap"])  # the workflow's, for the same intervals
    command = [sys.executable, "-m", "epiformer.cli", "summary", str(results), "--bootstrap", bootstrap, "--models"]
    subprocess.run([*command, "linear_pooled_distance", "distance", "distance_pooled"], check=True, capture_output=True)
    ours = pd.read_csv(results / "summary.tsv", sep="\t")
    workflow = pd.read_csv(pooled_run / "results" / "summary.tsv", sep="\t")
    workflow = workflow[workflow["model"].isin(["linear_pooled_distance", "distance", "distance_pooled"])]
    workflow = workflow.reset_index(drop=True)
    assert list(ours["kind"]) == ["transformer", "baseline", "baseline"] * len(CELLS)
    truth = ["oracle_auroc", "element_ceiling_auroc"]  # the workflow reads the demo's truth table; the command none
    assert ours[truth].isna().all().all()
    chosen = set(pd.read_csv(results / "selection.tsv", sep="\t").query("chosen")["model"])
    if chosen <= set(ours["model"]):  # the run's choice is among the models summarised: marked as the run marks it
        np.testing.assert_array_equal(ours["chosen_on_validation"], workflow["chosen_on_validation"])
    else:  # another model was chosen: this summary cannot mark it
        assert ours["chosen_on_validation"].isna().all()
    kept = truth + ["chosen_on_validation"]
    pd.testing.assert_frame_equal(ours.drop(columns=kept), workflow.drop(columns=kept))
    missing = subprocess.run([*command, "linear"], capture_output=True, text=True)
    assert missing.returncode == 1 and "no evaluated linear" in missing.stderr


def test_predict_gives_a_distance_aware_model_the_distance_of_each_pair(pooled_run, tmp_path):
    results = pooled_run / "results"
    _, scores = epiformer_predict(
        results / "demo_a" / "linear_distance",
        pooled_run / "resources/demo/genome.fa",
        pooled_run / "resources/demo/demo_a.pairs.csv",
        tmp_path / "scores.tsv",
    )
    workflow = pd.read_csv(results / "demo_a" / "linear_distance" / "predictions.tsv", sep="\t")
    both = workflow.merge(scores, on="pair_id", suffixes=("_workflow", "_predict"), validate="one_to_one")
    assert len(both) == len(workflow) and np.abs(both["score_workflow"] - both["score_predict"]).max() <= 1e-6


def test_transfer_is_planned_for_per_cell_models_only(pooled_run):
    run = snakemake(pooled_run, "-s", str(REPO / "Snakefile"), "-n", "--forceall")
    assert run.returncode == 0, run.stderr[-3000:]
    planned = run.stdout + run.stderr
    assert "results/transfer/linear.tsv" in planned and "results/transfer/linear_pooled" not in planned
    assert planned.count("rule train_pooled:") == 2


def test_a_distance_model_without_its_sequence_only_twin_is_refused(tmp_path):
    write_config(tmp_path, pooled_config({"linear_distance": POOLED["linear_distance"]}))
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "-n")
    assert run.returncode != 0 and "sequence-only twin" in run.stdout + run.stderr
    write_config(
        tmp_path,
        pooled_config({"x": POOLED["linear"], "x_distance": {**POOLED["linear"], "distance": True, "d_ff": 64}}),
    )
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "-n")
    assert run.returncode != 0 and "'x_distance' is given the genomic distance" in run.stdout + run.stderr


def test_a_cell_line_named_pooled_is_refused(tmp_path):
    write_config(tmp_path, pooled_config(POOLED))
    sheet = tmp_path / "config" / "samples.tsv"
    sheet.write_text(sheet.read_text().replace("demo_b\t", "pooled\t"))
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "-n")
    assert run.returncode != 0 and "'pooled' is reserved" in run.stdout + run.stderr
