"""Every setting has one source: the config schema's defaults are the dataclasses' defaults,
each value crosses each boundary once, and a bad setting fails while the DAG is built."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from epiformer.constants import BASELINES
from epiformer.data.batches import PairBatches
from epiformer.data.encode import encode_shards
from epiformer.data.genome import index_fasta
from epiformer.data.shards import load_manifest, load_split
from epiformer.data.splits import SplitSpec
from epiformer.data.windows import WindowSpec
from epiformer.model.configs import ATTENTIONS, INPUTS, POOLS, STEMS, ModelConfig, TrainConfig
from epiformer.synthetic.demo import DemoSpec
from epiformer.synthetic.demo_long import LongDemoSpec
from epiformer.training.train import train_model
from tests.helpers import REPO, TINY_MODEL, snakemake

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]
API_ONLY = {"max_shift"}
LONG_DEMO_API_ONLY = {
    "cell",
    "partner_fraction",
    "hard_fraction",
    "insulated_fraction",
    "insulator_sites",
    "clearance",
    "p_open",
    "p_blocked",
    "p_background",
}  # TrainConfig fields no config key sets (the flank travels in the shard manifest)


def schema_defaults(block: dict) -> dict:
    return {key: spec["default"] for key, spec in block["properties"].items() if "default" in spec}


def test_model_defaults_are_the_schema_defaults():
    schema = schema_defaults(SCHEMA["models"]["additionalProperties"])
    fields = {field.name: field.default for field in dataclasses.fields(ModelConfig)}
    # attention is required in the config; input, stem, pool, element_pool, between, patch_pool, zero_init,
    # positions and element_patch_size have no schema default, so that adding them left every trained model's
    # settings (and so the workflow's params, and results) as they were; max_positions is not a config key: the
    # workflow derives it from windows.max_span (configs.with_span_positions)
    unset = {"attention", "input", "stem", "pool", "element_pool", "between", "max_positions"}
    unset |= {"patch_pool", "zero_init", "positions", "element_patch_size"}
    assert set(schema) - {"pooled"} == set(fields) - unset
    assert (fields["stem"], fields["pool"]) == (STEMS[0], POOLS[0]) == ("linear", "mean")  # M7
    assert {key: fields[key] for key in schema if key != "pooled"} == {k: v for k, v in schema.items() if k != "pooled"}
    assert fields["input"] == INPUTS[0] == "elements"


def test_train_defaults_are_the_schema_defaults():
    schema = {
        **schema_defaults(SCHEMA["train"]),
        "reverse_complement": SCHEMA["augment"]["properties"]["reverse_complement"]["default"],
    }
    fields = {field.name: field.default for field in dataclasses.fields(TrainConfig)}
    assert set(fields) - API_ONLY == set(schema), "every train: key is a TrainConfig field, and nothing else"
    assert {key: fields[key] for key in schema} == schema


@pytest.mark.parametrize(
    "spec, block, api_only",
    [
        (WindowSpec, "windows", set()),
        (SplitSpec, "split", set()),
        (DemoSpec, "demo", {"min_distance", "max_distance", "cells", "enhancers_per_mb", "promoters_per_mb"}),
        (LongDemoSpec, "demo_long", LONG_DEMO_API_ONLY),
    ],
)
def test_stage_spec_defaults_are_the_schema_defaults(spec, block, api_only):
    schema = schema_defaults(SCHEMA[block])
    fields = {field.name: field.default for field in dataclasses.fields(spec)}
    assert set(fields) - api_only == set(schema)
    if spec is WindowSpec:
        # The workflow passes windows.max_span only when a model reads spans (common.smk windows_params);
        # otherwise the stage drops no pair for its span: WindowSpec's None.
        assert fields.pop("max_span") is None and schema.pop("max_span") == 2_100_000
    assert {key: (list(fields[key]) if isinstance(fields[key], tuple) else fields[key]) for key in schema} == schema


def test_schema_choices_are_the_package_constants():
    assert tuple(SCHEMA["baselines"]["properties"]["names"]["items"]["enum"]) == BASELINES
    assert tuple(SCHEMA["models"]["additionalProperties"]["properties"]["attention"]["enum"]) == ATTENTIONS
    assert tuple(SCHEMA["models"]["additionalProperties"]["properties"]["input"]["enum"]) == INPUTS
    assert tuple(SCHEMA["models"]["additionalProperties"]["properties"]["stem"]["enum"]) == STEMS
    assert tuple(SCHEMA["models"]["additionalProperties"]["properties"]["pool"]["enum"]) == POOLS


def test_documented_config_sets_every_schema_key():
    """config/config.yaml documents every key next to its value; a key the schema adds must appear there."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for block in (
        "train",
        "augment",
        "encode",
        "evaluate",
        "baselines",
        "split",
        "windows",
        "demo",
        "demo_long",
        "scaling",
    ):
        missing = set(SCHEMA[block]["properties"]) - set(config[block])
        assert not missing, f"config/config.yaml {block}: does not document {sorted(missing)}"
    assert set(SCHEMA["resources"]["properties"]["train"]["properties"]) == set(config["resources"]["train"])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"models": {"linear": {"attention": "linear", "d_model": 66, "n_heads": 4}}}, "models: linear: d_model (66)"),
        ({"models": {"linear": {"attention": "linear", "patch_size": 8, "kernel_size": 4}}}, "kernel_size (4)"),
        ({"train": {"batch_size": 33, "devices": 2}}, "train.batch_size (33) must divide by train.devices (2)"),
        ({"train": {"mem_mb": 8000}}, "'mem_mb' was unexpected"),
        # The settings below passed `snakemake -n` once and failed only inside the windows job.
        (
            {"split": {"val_chromosomes": ["chr5"], "test_chromosomes": ["chr6", "chr5"]}},
            "split: chr5 is in both split.val_chromosomes and split.test_chromosomes",
        ),
        ({"split": {"test_chromosomes": []}}, "split.test_chromosomes is empty: the test split would hold no pairs"),
        (
            {"split": {"mode": "random", "val_fraction": 0.4, "test_fraction": 0.6}},
            "split.val_fraction (0.4) + split.test_fraction (0.6) is 1 or more: the train split would be empty",
        ),
        (
            {"models": {"span": {"attention": "linear", "input": "span"}}, "windows": {"max_span": 400}},
            "windows.max_span (400 bp) is shorter than the two windows a span holds (enhancer_width 256 + "
            "promoter_width 224 = 480 bp)",
        ),
        ({"train": {"learning_rate": "3e-4"}}, "train.learning_rate is '3e-4', which YAML reads as text"),
    ],
)
def test_bad_settings_fail_while_the_dag_is_built(tmp_path, change, message):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(change))
    (tmp_path / "config").symlink_to(REPO / "config")
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "--configfile", str(tmp_path / "bad.yaml"), "-n")
    assert run.returncode != 0
    assert message in run.stderr + run.stdout
    assert "Job stats" not in run.stdout + run.stderr  # nothing was planned, let alone run


def test_a_held_out_chromosome_the_genome_lacks_fails_while_the_dag_is_built(tmp_path):
    fasta = tmp_path / "g.fa"
    fasta.write_text("".join(f">chr{n}\n{'ACGT' * 50}\n" for n in range(1, 6)))
    index_fasta(fasta)
    change = {"genomes": {"demo": str(fasta)}, "split": {"val_chromosomes": ["chr5"], "test_chromosomes": ["6"]}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(change))
    (tmp_path / "config").symlink_to(REPO / "config")
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "--configfile", str(tmp_path / "bad.yaml"), "-n")
    assert run.returncode != 0 and "Job stats" not in run.stdout + run.stderr
    assert f"split.test_chromosomes: 6 is not a chromosome of genome demo ({fasta})" in run.stderr + run.stdout
    change["split"]["test_chromosomes"] = ["chr4"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(change))
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "--configfile", str(tmp_path / "bad.yaml"), "-n")
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    """Real shards of a small random genome: 24 + 20 bp windows with a 4 bp flank."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("genome")
    fasta = folder / "g.fa"
    fasta.write_text(">chrA\n" + "".join(rng.choice(list("ACGT"), 4000)) + "\n")
    starts = np.arange(40, 3400, 40)
    windows = pd.DataFrame(
        {
            "pair_id": range(len(starts)),
            "label": [(i // 4) % 2 for i in range(len(starts))],
            "split": [("train", "train", "val", "test")[i % 4] for i in range(len(starts))],
            "distance": 400,
            "enhancer_chrom": "chrA",
            "enhancer_start": starts,
            "enhancer_end": starts + 24,
            "promoter_chrom": "chrA",
            "promoter_start": starts + 402,
            "promoter_end": starts + 422,
        }
    )
    spec = {"enhancer_width": 24, "promoter_width": 20, "edge": "shift", "allow_trans": False, "max_n_fraction": 0.5}
    out = tmp_path_factory.mktemp("shards")
    encode_shards(windows, fasta, out, flank=4, shard_size=16, windows_stats={"windows": spec})
    return out


def test_the_manifest_holds_the_window_spec_and_flank_once_and_model_json_copies_them(shard_dir, tmp_path):
    manifest = load_manifest(shard_dir)
    assert not {"widths", "lengths"} & set(manifest), "the widths live in `windows` only"
    assert manifest["windows"]["enhancer_width"] == 24 and manifest["flank"] == 4
    model = ModelConfig(**{**TINY_MODEL, "attention": "linear"})
    description = train_model(shard_dir, model, TrainConfig(epochs=1, batch_size=8), tmp_path / "out", tmp_path / "ck")
    assert description["windows"] == manifest["windows"] and description["flank"] == manifest["flank"]
    assert json.loads((tmp_path / "out" / "model.json").read_text())["windows"] == manifest["windows"]


def test_asking_for_more_shift_than_the_flank_raises(shard_dir, tmp_path):
    train = load_split(shard_dir, "train")
    PairBatches(train, 8, shuffle=True, max_shift=4)  # the whole flank is fine
    with pytest.raises(ValueError, match="shift of up to 5 bp.*hold 4 bp of flank.*augment.max_shift"):
        PairBatches(train, 8, shuffle=True, max_shift=5)
    model = ModelConfig(**{**TINY_MODEL, "attention": "linear"})
    with pytest.raises(ValueError, match="hold 4 bp of flank"):
        train_model(shard_dir, model, TrainConfig(epochs=1, batch_size=8, max_shift=5), tmp_path / "o", tmp_path / "c")


def test_every_span_model_gets_a_length_control_unless_told_otherwise():
    from epiformer.model.configs import architecture, length_control_of, with_length_controls

    models = {
        "linear": {"attention": "linear"},
        "span": {"attention": "linear", "input": "span", "replicates": 3},
        "quiet": {"attention": "softmax", "input": "span", "length_control": False},
        "own": {"attention": "linear", "input": "span", "d_model": 32},
        "own_length_control": {"attention": "linear", "input": "span", "d_model": 32, "between": "shuffled"},
    }
    controlled = with_length_controls(models)
    assert list(controlled) == ["linear", "span", "span_length_control", "quiet", "own", "own_length_control"]
    assert controlled["span_length_control"] == {**models["span"], "between": "shuffled"}  # replicates too
    assert controlled["own_length_control"] is models["own_length_control"]  # the config's own entry, as written
    assert with_length_controls(models, default=False) == models
    assert with_length_controls({"q": {**models["quiet"], "length_control": True}}, default=False).keys() == {
        "q",
        "q_length_control",
    }
    assert (
        "length_control"
        not in with_length_controls({"q": {**models["quiet"], "length_control": True}})["q_length_control"]
    )
    assert length_control_of(controlled, "span") == "span_length_control"
    assert length_control_of(controlled, "own") == "own_length_control"
    assert length_control_of(controlled, "quiet") is None and length_control_of(controlled, "linear") is None
    assert length_control_of(controlled, "span_length_control") is None  # a control has no control
    # Two span models of one architecture and two recipes: each is set against its own control.
    span = models["span"]
    recipes = with_length_controls({"slow": {**span, "learning_rate": 1e-4}, "fast": {**span, "learning_rate": 1e-2}})
    assert length_control_of(recipes, "fast") == "fast_length_control"
    assert length_control_of(recipes, "slow") == "slow_length_control"
    ModelConfig(**architecture(controlled["span_length_control"]))  # a valid model
    with pytest.raises(ValueError, match="needs input: span"):
        ModelConfig(between="shuffled")
