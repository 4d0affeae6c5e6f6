"""The run plan (epiformer.plan): what a config asks the workflow for, answered without Snakemake."""

import copy

import pytest
import yaml

from epiformer.plan import RunPlan
from tests.helpers import REPO

DEFAULTS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
M7 = {"attention": "linear", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}


def config_with(models: dict, **train) -> dict:
    config = copy.deepcopy(DEFAULTS)
    config["models"] = copy.deepcopy(models)
    config["train"].update(train)
    return config


def test_pooled_models_bring_pooled_baselines_and_live_in_one_folder():
    plan = RunPlan(config_with({"linear": M7, "linear_pooled": {**M7, "pooled": True}}), ["a", "b"])
    assert plan.pooled_models == ["linear_pooled"] and plan.cell_models == ["linear"]
    assert plan.pooled_baselines == [name + "_pooled" for name in DEFAULTS["baselines"]["names"]]
    assert plan.evaluated == ["linear", "linear_pooled", *plan.baselines, *plan.pooled_baselines]
    assert (
        plan.model_dir("a", "linear_pooled") == plan.model_dir("b", "linear_pooled") == "results/pooled/linear_pooled"
    )
    assert plan.model_dir("a", "linear") == "results/a/linear"
    assert plan.transfer_models == ["linear"]  # per cell line, with more than one cell line
    alone = RunPlan(config_with({"linear": M7}), ["a"])
    assert alone.pooled_baselines == [] and alone.transfer_models == []


def test_a_span_model_gets_its_length_control_span_shards_and_scores_where_it_trained():
    span = {**M7, "input": "span", "patch_size": 128, "kernel_size": 128}
    plan = RunPlan(config_with({"linear": M7, "span": span}, device="auto"), ["a"])
    assert plan.models == ["linear", "span", "span_length_control"]
    assert plan.entry("span_length_control")["between"] == "shuffled"
    assert plan.span_models == ["span", "span_length_control"] and plan.element_models == ["linear"]
    assert plan.explained_span_models == ["span"]  # the control reads shuffled sequence: nothing there to explain
    assert (
        plan.shards_of("a", "span") == "results/a/span_shards" and plan.shards_of("a", "linear") == "results/a/shards"
    )
    max_span = DEFAULTS["windows"]["max_span"]
    assert plan.model_config("span")["max_positions"] == -(-max_span // 128)  # positions over the longest span
    assert (plan.scoring_device("span"), plan.scoring_gpus("span")) == ("auto", 1)
    assert (plan.scoring_device("linear"), plan.scoring_gpus("linear"), plan.scoring_tokens("linear")) == ("cpu", 0, 0)
    assert plan.windows_params()["max_span"] == max_span
    assert RunPlan(config_with({"linear": M7}), ["a"]).windows_params()["max_span"] is None
    without = config_with({"span": span})
    without["length_control"] = False
    assert RunPlan(without, ["a"]).models == ["span"]
    assert RunPlan(without, ["a"]).explained_span_models == ["span"]


def test_a_training_job_reads_its_models_own_budget_recipe_and_seed_and_no_span_key_it_ignores():
    models = {
        "linear": M7,
        "fast": {**M7, "learning_rate": 0.01, "weight_decay": 0.1, "max_tokens": 500, "replicates": 3},
    }
    plan = RunPlan(config_with(models, replicates=1, seed=5, learning_rate=0.002), ["a"])
    shared, own = plan.train_params("linear"), plan.train_params("fast", replicate=2)
    assert (shared["learning_rate"], shared["weight_decay"], shared["max_tokens"]) == (0.002, 0.01, 0)
    assert (own["learning_rate"], own["weight_decay"], own["max_tokens"]) == (0.01, 0.1, 500)
    assert own["seed"] == plan.train_config.replicate_seed(2) != shared["seed"] == 5
    assert "replicates" not in own and "max_tokens_per_batch" not in own  # element models read no span batch size
    assert plan.replicated_models == ["fast"] and plan.replicates == ["replicates/1", "replicates/2", "replicates/3"]
    assert plan.replicates_of("linear") == [] and plan.replicates_of("fast") == plan.replicates


@pytest.mark.parametrize(
    ("models", "train", "message"),
    [
        ({"kmer": M7}, {}, "is also a baseline's name"),
        ({"a": {**M7, "replicates": 2}, "b": {**M7, "replicates": 3}}, {}, "must share one replicate count"),
        ({"linear": {**M7, "n_heads": 3}}, {}, "models: linear:"),
        ({"linear": M7}, {"no_such_key": 1}, "train:"),
        ({"span": {**M7, "input": "span", "pooled": True}}, {}, "reads spans and is pooled"),
        ({"linear_distance": {**M7, "distance": True}}, {}, "no model has the same settings without it"),
        ({"linear": M7, "d": {**M7, "distance": True, "learning_rate": 0.01}}, {}, "no model has the same settings"),
    ],
)
def test_a_config_the_workflow_cannot_run_is_refused_with_its_key(models, train, message):
    with pytest.raises(ValueError, match=message):
        RunPlan(config_with(models, **train), ["a"])


def test_a_distance_aware_model_with_its_sequence_only_twin_is_accepted():
    plan = RunPlan(config_with({"linear": M7, "linear_distance": {**M7, "distance": True}}), ["a"])
    assert plan.sequence_only_twin("linear_distance") == "linear"
