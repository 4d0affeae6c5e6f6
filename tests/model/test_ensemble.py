"""epiformer.model.ensemble and epiformer.training.replicates: an ensemble scores the mean probability of its
replicates, exactly and without overflow, and only replicates of one model on one split make an ensemble."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from epiformer.model.configs import ModelConfig
from epiformer.model.ensemble import EnsembleModel
from epiformer.model.transformer import EPITransformer
from epiformer.training.replicates import ReplicateError, ensemble_description, replicate_names
from tests.helpers import TINY_MODEL

TINY = TINY_MODEL


def test_the_ensembles_probability_is_the_mean_of_its_replicates_probabilities():
    replicates = []
    for seed in range(3):
        torch.manual_seed(seed)
        replicates.append(EPITransformer(ModelConfig(attention="linear", **TINY)).eval())
    ensemble = EnsembleModel(replicates).eval()
    generator = torch.Generator().manual_seed(0)
    enhancer = torch.nn.functional.one_hot(torch.randint(0, 4, (5, 40), generator=generator), 4).float()
    promoter = torch.nn.functional.one_hot(torch.randint(0, 4, (5, 32), generator=generator), 4).float()
    with torch.no_grad():
        mean = torch.stack([torch.sigmoid(model(enhancer, promoter)) for model in replicates]).mean(0)
        assert torch.allclose(torch.sigmoid(ensemble(enhancer, promoter)), mean, atol=1e-6, rtol=0)
    assert ensemble.config == replicates[0].config


class FixedLogits(nn.Module):
    def __init__(self, logits):
        super().__init__()
        self.logits = torch.tensor(logits, dtype=torch.float32)
        self.config = ModelConfig()

    def forward(self, *args, **kwargs):
        return self.logits


def test_extreme_logits_give_the_mean_probability_not_infinity():
    # Pair 0: probabilities 1 and 0 (in float32) and 0.5, mean 0.5. Pair 1: all within 1e-12 of 1, where the
    # mean probability rounds to 1 in float32 but its logit, -log(mean(exp(-l))), is finite.
    ensemble = EnsembleModel([FixedLogits([40.0, 30.0]), FixedLogits([-40.0, 31.0]), FixedLogits([0.0, 29.0])])
    logits = ensemble()
    assert torch.isfinite(logits).all()
    assert torch.sigmoid(logits[0]).item() == pytest.approx(0.5, abs=1e-6)
    near_one = torch.tensor([30.0, 31.0, 29.0], dtype=torch.float64)
    assert logits[1].item() == pytest.approx(-torch.log(torch.exp(-near_one).mean()).item(), rel=1e-5)


def test_replicates_of_different_models_do_not_make_an_ensemble():
    with pytest.raises(ValueError, match="share one model config"):
        EnsembleModel([EPITransformer(ModelConfig(**TINY)), EPITransformer(ModelConfig(**{**TINY, "n_layers": 2}))])


def replicate_description(seed: int, manifest: str = "abc") -> dict:
    return {
        "model": ModelConfig(**TINY).to_dict(),
        "windows": {"enhancer_width": 40, "promoter_width": 40},
        "flank": 0,
        "split": {"mode": "chromosome"},
        "trained_on": None,
        "data_manifest_sha256": manifest,
        "train": {"seed": seed, "epochs": 2},
        "parameters": 100,
        "best_epoch": seed,
        "best_val_auprc": 0.5 + seed / 10,
        "train_seconds": 10.0 + seed,
        "tokens_per_s": 100.0 * (seed + 1),
        "epochs_trained": 2.0,
        "time_budget_reached": False,
        "device": "cpu",
        "peak_memory_mb": 200.0 + seed,
        "versions": {},
    }


def test_the_ensembles_description_sums_the_cost_and_names_each_replicate(tmp_path):
    names = replicate_names(3)
    assert names == ["replicates/1", "replicates/2", "replicates/3"] and replicate_names(1) == []
    for seed, name in enumerate(names):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "model.json").write_text(json.dumps(replicate_description(seed)))
    description = ensemble_description(tmp_path, names)
    assert description["replicates"] == names and description["seeds"] == [0, 1, 2]
    assert description["parameters"] == 300 and description["train_seconds"] == 33.0
    assert description["peak_memory_mb"] == 202.0 and description["tokens_per_s"] == 200.0
    assert description["model"] == replicate_description(0)["model"] and description["train"]["seed"] is None


def test_replicates_trained_on_other_data_are_refused_naming_the_file(tmp_path):
    names = replicate_names(2)
    for seed, (name, manifest) in enumerate(zip(names, ("abc", "def"))):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "model.json").write_text(json.dumps(replicate_description(seed, manifest)))
    with pytest.raises(ReplicateError, match=r"replicates/2/model.json differs from .* in data_manifest_sha256"):
        ensemble_description(tmp_path, names)


def test_under_bf16_autocast_the_ensemble_still_averages_in_float32():
    # On a GPU, scoring runs under bf16 autocast: the replicates' logits come out in bf16, the mean must not.
    ensemble = EnsembleModel([FixedLogits([2.0, -3.0]), FixedLogits([0.5, 4.0])])
    ensemble.replicates[0].logits = ensemble.replicates[0].logits.bfloat16()
    ensemble.replicates[1].logits = ensemble.replicates[1].logits.bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = ensemble()
    assert logits.dtype == torch.float32
    mean = torch.stack([torch.sigmoid(r.logits.float()) for r in ensemble.replicates]).mean(0)
    assert torch.allclose(torch.sigmoid(logits), mean, atol=1e-6, rtol=0)


def test_the_ensembles_description_records_its_replicate_count_and_refuses_other_recipes(tmp_path):
    names = replicate_names(2)
    for seed, name in enumerate(names):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "model.json").write_text(json.dumps(replicate_description(seed)))
    assert ensemble_description(tmp_path, names)["train"] == {"seed": None, "epochs": 2, "replicates": 2}
    other = {**replicate_description(1), "train": {"seed": 1, "epochs": 3}}
    (tmp_path / names[1] / "model.json").write_text(json.dumps(other))
    with pytest.raises(ReplicateError, match=r"differs from .* in train \(other than the seed\)"):
        ensemble_description(tmp_path, names)
