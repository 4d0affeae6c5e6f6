"""A real tiny Snakemake run with train.replicates: 2: one training job per replicate, scored as their ensemble
by every tool that takes a model (evaluate, summary, transfer, predict, variants, explain)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from safetensors.torch import load_file
from sklearn.metrics import average_precision_score, roc_auc_score

from tests.helpers import (
    TINY_MODEL,
    copy_workflow,
    epiformer_predict,
    job_counts,
    require_bedtools,
    run_workflow,
    snakemake,
    tiny_config,
)
from tests.workflow.test_variants_workflow import demo_vcf

CELLS = ("demo_a", "demo_b")
REPLICATES = ("replicates/1", "replicates/2")


@pytest.fixture(scope="module")
def replicates_run(tmp_path_factory):
    require_bedtools()
    config = tiny_config()
    config["models"] = {
        "linear": {"attention": "linear", **TINY_MODEL},
        "linear_pooled": {"attention": "linear", **TINY_MODEL, "pooled": True},
        "linear_once": {"attention": "linear", **TINY_MODEL, "replicates": 1},  # its own count: one model
    }
    config["baselines"]["names"] = ["distance"]
    config["train"].update(replicates=2, seed=5)
    config["explain"] = {"top_pairs": 10, "ism_pairs": 2, "method": "saliency"}
    folder = copy_workflow(tmp_path_factory.mktemp("replicates_workflow"), config)
    run_workflow(folder, "resources/demo/genome.fa")
    demo_vcf(folder)
    sheet = pd.read_csv(folder / "config" / "samples.tsv", sep="\t", dtype=str)
    sheet["vcf"] = ["data/demo_a.vcf", ""]
    sheet.to_csv(folder / "config" / "samples.tsv", sep="\t", index=False)
    planned = snakemake(folder, "-n")
    assert planned.returncode == 0, planned.stderr[-3000:]
    run_workflow(
        folder,
        "results/summary.tsv",
        "results/transfer/linear.tsv",
        "results/demo_a/linear/variants.tsv",
        "results/demo_a/linear/attributions.safetensors",
        "results/plots/demo_a/linear.training.png",
        "results/plots/pooled/linear_pooled.training.png",
        timeout=900,
    )
    return {"folder": folder, "results": folder / "results", "planned": job_counts(planned.stdout)}


def test_each_replicate_is_its_own_training_job_with_its_own_seed(replicates_run):
    planned, results = replicates_run["planned"], replicates_run["results"]
    assert planned["train_replicate"] == len(CELLS) * 2 and planned["train_pooled_replicate"] == 2
    assert planned["ensemble"] == len(CELLS) and planned["ensemble_pooled"] == 1
    assert planned["train"] == len(CELLS) and "train_pooled" not in planned  # linear_once, once per cell line
    for folder in (results / "demo_a" / "linear", results / "pooled" / "linear_pooled"):
        seeds = [json.loads((folder / name / "model.json").read_text())["train"]["seed"] for name in REPLICATES]
        assert seeds == [5, 6]  # train.seed, then the next
        weights = [load_file(str(folder / name / "model.safetensors")) for name in REPLICATES]
        assert any(not np.array_equal(weights[0][key], weights[1][key]) for key in weights[0])
        ensemble = json.loads((folder / "model.json").read_text())
        assert ensemble["replicates"] == list(REPLICATES) and ensemble["seeds"] == [5, 6]
        assert not (folder / "model.safetensors").exists()  # the replicates hold the weights
        one = json.loads((folder / REPLICATES[0] / "model.json").read_text())
        assert ensemble["parameters"] == 2 * one["parameters"] and ensemble["model"] == one["model"]


def test_the_ensemble_scores_the_mean_probability_of_its_replicates(replicates_run):
    results = replicates_run["results"]
    for cell in CELLS:
        for model in ("linear", "linear_pooled"):
            folder = results / cell / model
            ensemble = pd.read_csv(folder / "predictions.tsv", sep="\t")
            members = [pd.read_csv(folder / name / "predictions.tsv", sep="\t") for name in REPLICATES]
            for member in members:
                assert member["pair_id"].tolist() == ensemble["pair_id"].tolist()
            mean = np.mean([member["score"] for member in members], axis=0)
            np.testing.assert_allclose(ensemble["score"], mean, atol=1e-6, rtol=0)
            metrics = json.loads((folder / "metrics.json").read_text())
            labels = ensemble["label"]
            assert metrics["auroc"] == pytest.approx(roc_auc_score(labels, ensemble["score"]), abs=1e-9)
            for entry, member in zip(metrics["replicates"], members):
                assert entry["auroc"] == pytest.approx(roc_auc_score(labels, member["score"]), abs=1e-9)
                assert entry["auprc"] == pytest.approx(average_precision_score(labels, member["score"]), abs=1e-9)
            aurocs = [entry["auroc"] for entry in metrics["replicates"]]
            assert metrics["replicate_auroc_mean"] == pytest.approx(np.mean(aurocs))
            assert metrics["replicate_auroc_sd"] == pytest.approx(np.std(aurocs, ddof=1))


def test_the_summary_gives_the_ensemble_with_each_replicate_and_their_spread(replicates_run):
    results = replicates_run["results"]
    summary = pd.read_csv(results / "summary.tsv", sep="\t").set_index(["cell_line", "model"])
    for cell in CELLS:
        metrics = json.loads((results / cell / "linear" / "metrics.json").read_text())
        row = summary.loc[(cell, "linear")]
        assert row["auroc"] == pytest.approx(metrics["auroc"], abs=1e-4)  # the ensemble's
        assert row["replicates"] == 2
        assert row["replicate_aurocs"] == ";".join(f"{entry['auroc']:.4f}" for entry in metrics["replicates"])
        assert row["replicate_auroc_sd"] == pytest.approx(metrics["replicate_auroc_sd"], abs=1e-4)
        assert pd.isna(summary.loc[(cell, "distance"), "replicates"])
    markdown = (results / "summary.md").read_text()
    assert "## Replicates: the ensemble and the spread of its members" in markdown
    assert sum(line.startswith("| demo_a | linear | 2 |") for line in markdown.splitlines()) == 1


def test_predict_variants_transfer_and_explain_take_the_ensemble(replicates_run, tmp_path):
    folder, results = replicates_run["folder"], replicates_run["results"]
    _, scores = epiformer_predict(
        results / "demo_a" / "linear",
        folder / "resources/demo/genome.fa",
        folder / "resources/demo/demo_a.pairs.csv",
        tmp_path / "scores.tsv",
    )
    workflow = pd.read_csv(results / "demo_a" / "linear" / "predictions.tsv", sep="\t")
    both = workflow.merge(scores, on="pair_id", suffixes=("_workflow", "_predict"), validate="one_to_one")
    assert len(both) == len(workflow) and np.abs(both["score_workflow"] - both["score_predict"]).max() <= 1e-6
    variants = pd.read_csv(results / "demo_a" / "linear" / "variants.tsv", sep="\t").merge(scores, on="pair_id")
    assert len(variants) and np.abs(variants["ref_score"] - variants["score"]).max() <= 1e-6  # the ensemble's score
    transfer = pd.read_csv(results / "transfer" / "linear.tsv", sep="\t")
    for row in transfer[transfer["train_cell"] == transfer["test_cell"]].itertuples():
        metrics = json.loads((results / row.train_cell / "linear" / "metrics.json").read_text())
        assert row.auroc == pytest.approx(metrics["auroc"], abs=1e-6)
    attributions = load_file(str(results / "demo_a" / "linear" / "attributions.safetensors"))
    assert all(np.isfinite(tensor.numpy()).all() for tensor in attributions.values())
    assert any(np.abs(tensor.numpy()).sum() > 0 for tensor in attributions.values())


def test_a_replicate_whose_training_is_lost_is_retrained_alone_to_the_same_weights(replicates_run):
    folder, results = replicates_run["folder"], replicates_run["results"]
    weights = results / "demo_b" / "linear" / "replicates" / "2" / "model.safetensors"
    first = results / "demo_b" / "linear" / "replicates" / "1" / "model.safetensors"
    before, first_before = weights.read_bytes(), first.stat().st_mtime_ns
    weights.unlink()
    target = str(weights.relative_to(folder))
    dry = snakemake(folder, "-n", target)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert job_counts(dry.stdout)["train_replicate"] == 1 and "cell=demo_b, model=linear, replicate=2" in dry.stdout
    run_workflow(folder, target)
    assert weights.read_bytes() == before  # its own seed, its own checkpoint folder: the same model again
    log = (folder / "logs" / "demo_b" / "linear" / "replicates" / "2" / "train.log").read_text()
    assert "Resuming from .epiformer-checkpoints/demo_b/linear/replicates/2/last.pt" in log  # its own checkpoint
    assert first.stat().st_mtime_ns == first_before  # replicate 1 untouched


def test_a_model_of_its_own_replicates_1_is_one_model_beside_replicated_ones(replicates_run):
    results = replicates_run["results"]
    for cell in CELLS:
        folder = results / cell / "linear_once"
        description = json.loads((folder / "model.json").read_text())
        assert (folder / "model.safetensors").is_file() and not (folder / "replicates").exists()
        assert description["train"]["seed"] == 5 and description["train"]["replicates"] == 1
    summary = pd.read_csv(results / "summary.tsv", sep="\t").set_index(["cell_line", "model"])
    assert summary.loc[("demo_a", "linear_once"), "replicates"] == 1
    assert summary.loc[("demo_a", "linear"), "replicates"] == 2


def test_replicates_given_per_model_train_only_that_model_as_replicates(tmp_path):
    config = tiny_config()
    config["models"] = {
        "linear": {"attention": "linear", **TINY_MODEL, "replicates": 3},
        "softmax": {"attention": "softmax", **TINY_MODEL},
    }
    folder = copy_workflow(tmp_path, config)
    dry = snakemake(folder, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    planned = job_counts(dry.stdout)
    assert planned["train_replicate"] == len(CELLS) * 3 and planned["ensemble"] == len(CELLS)
    assert planned["train"] == len(CELLS)  # softmax: train.replicates 1
    assert planned["evaluate_replicated"] == len(CELLS) and planned["evaluate"] == len(CELLS)
    assert "cell=demo_a, model=linear, replicate=3" in dry.stdout


def test_replicated_models_of_different_counts_are_refused_naming_both(tmp_path):
    config = tiny_config()
    config["models"] = {
        "linear": {"attention": "linear", **TINY_MODEL, "replicates": 3},
        "softmax": {"attention": "softmax", **TINY_MODEL},
    }
    config["train"]["replicates"] = 2
    folder = copy_workflow(tmp_path, config)
    dry = snakemake(folder, "-n")
    assert dry.returncode != 0
    message = dry.stdout + dry.stderr  # snakemake prints a Snakefile's error on stdout
    assert "linear 3, softmax 2" in message and "replicates: 1" in message
