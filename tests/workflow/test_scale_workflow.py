"""A real Snakemake run of the demo at real distances, at test size: the data, span shards over Mb spans,
a span model at 128 bp a token (config/demo_scale.yaml's tokens) beside its length control, and the summary."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.helpers import REPO, TINY_MODEL, copy_workflow, job_counts, run_workflow, snakemake, tiny_config

SCALE_MODEL = {**TINY_MODEL, "attention": "linear", "input": "span", "patch_size": 128, "kernel_size": 19}
SCALE_MODEL.update(stem="conv_exp", patch_pool="softmax", zero_init=True, positions="none")
SCALE_MODEL.update(pool="max", element_pool=True, element_patch_size=4)


@pytest.fixture(scope="module")
def scale_run(tmp_path_factory):
    """config/demo_scale.yaml's design at test size: 3 chromosomes of 8 Mb, 60 pairs, a token budget."""
    config = tiny_config()
    config["samples"] = "config/demo_scale.tsv"
    config["genomes"] = {"demo_scale": "resources/demo_scale/genome.fa"}
    config["demo_scale"] = {"n_chromosomes": 3, "chromosome_length": 8_000_000, "pairs": 60}
    config["windows"].update(max_span=1_900_000)
    config["models"] = {"linear": {"attention": "linear", **TINY_MODEL}, "span": SCALE_MODEL}
    config["train"].update(epochs=10, max_tokens_per_batch=40_000, max_tokens=100_000)  # about 2.6 epochs
    config["baselines"]["names"] = ["distance"]
    folder = copy_workflow(tmp_path_factory.mktemp("scale"), config)
    (folder / "config" / "demo_scale.tsv").write_text((REPO / "config" / "demo_scale.tsv").read_text())
    run_workflow(folder, timeout=1200)
    return folder / "results"


def test_the_scale_demo_runs_with_spans_of_real_length_and_every_span_model_beside_its_length_control(scale_run):
    ceiling = json.loads((scale_run.parent / "resources" / "demo_scale" / "demo_scale.ceiling.json").read_text())
    assert ceiling["spans"]["distance_max"] > 500_000  # real distances, not the long demo's 50 kb
    windows = pd.read_csv(scale_run / "demo_scale" / "windows.tsv", sep="\t")
    stats = json.loads((scale_run / "demo_scale" / "windows_stats.json").read_text())
    assert stats["pairs_kept"] == stats["pairs_in"] == len(windows) == 60  # no span is dropped
    summary = pd.read_csv(scale_run / "summary.tsv", sep="\t").set_index("model")
    assert set(summary.index) == {"linear", "span", "span_length_control", "distance"}
    assert summary.loc["span_length_control", "between"] == "shuffled"
    assert summary["auroc_diff_length_control"].notna().sum() == 1
    # The summary's ceiling is the elements-and-distance ceiling the generator wrote: below the oracle.
    assert (summary["element_ceiling_auroc"] < summary["oracle_auroc"]).all()
    for model in ("span", "span_length_control"):
        description = json.loads((scale_run / "demo_scale" / model / "model.json").read_text())
        assert description["token_budget_reached"] and description["tokens_trained"] >= 100_000
        assert 2 < description["epochs_trained"] < 10
        keys = ("patch_size", "stem", "patch_pool", "positions", "element_patch_size")
        model_settings = {key: description["model"][key] for key in keys}
        shipped = {"patch_size": 128, "stem": "conv_exp", "patch_pool": "softmax", "positions": "none"}
        assert model_settings == {**shipped, "element_patch_size": 4}  # the control reads its elements as the model


def test_the_shipped_overlay_plans_the_span_models_their_control_and_the_rest(tmp_path):
    for name in ("config", "data"):
        (tmp_path / name).symlink_to(REPO / name)
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "--configfile", str(REPO / "config/demo_scale.yaml"), "-n")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = job_counts(run.stdout + run.stderr)
    replicates = yaml.safe_load((REPO / "config/demo_scale.yaml").read_text())["models"]["linear_span"]["replicates"]
    assert replicates > 1  # the span model's replicates and their ensemble
    assert counts["demo_scale_data"] == 1 and counts["train_replicate"] == replicates and counts["ensemble"] == 1
    assert counts["train"] == 4  # linear, softmax (element windows), the length control, softmax_span
    assert "linear_span_length_control/model.safetensors" in run.stdout + run.stderr
