"""A trained model folder loaded, a split scored, the device and its precision chosen."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from epiformer.data.genome import Genome
from epiformer.data.shards import load_split
from epiformer.inference.devices import device_label, labelled_device_type, mixed_precision, select_device
from epiformer.inference.trained_model import ModelError, load_trained_model, predict_split
from epiformer.sequence.onehot import one_hot


def test_the_trained_weights_load_into_the_model_model_json_describes(trained_cells, device):
    model_dir = trained_cells["demo_a"] / "linear"
    model, description = load_trained_model(model_dir, device)
    assert description == json.loads((model_dir / "model.json").read_text())
    assert not model.training and model.config.to_dict() == description["model"]
    saved = load_file(str(model_dir / "model.safetensors"))
    state = model.state_dict()
    assert sorted(state) == sorted(saved) and len(saved) > 10
    for name, tensor in saved.items():
        assert state[name].device.type == device and torch.equal(state[name].cpu(), tensor), name


@pytest.mark.parametrize("missing", ["model.json", "model.safetensors"])
def test_a_folder_without_its_model_files_is_named_with_the_fix(trained_cells, tmp_path, missing):
    folder = shutil.copytree(trained_cells["demo_a"] / "linear", tmp_path / "linear")
    (folder / missing).unlink()
    with pytest.raises(ModelError, match=rf"{folder} has no {missing}. Give a trained model folder, results/<cell>/"):
        load_trained_model(folder)


def centred_windows(genome_path, windows: pd.DataFrame) -> dict[str, torch.Tensor]:
    """One-hot [N, W, 4] of each element's window, read from the genome (not from the shards)."""
    onehot = {}
    with Genome(genome_path) as genome:
        for element in ("enhancer", "promoter"):
            coordinates = zip(windows[f"{element}_chrom"], windows[f"{element}_start"], windows[f"{element}_end"])
            onehot[element] = torch.from_numpy(one_hot([genome.fetch(*where) for where in coordinates])).float()
    return onehot


def test_predict_split_scores_are_the_models_probabilities_on_the_centred_windows(tiny_demo, trained_cells, device):
    """Scores, labels and pair ids of the test split in shard order; on CUDA within bf16 rounding of float32."""
    folder = trained_cells["demo_a"]
    model, _ = load_trained_model(folder / "linear")
    test = pd.read_csv(folder / "windows.tsv", sep="\t").query("split == 'test'").set_index("pair_id")
    data = load_split(folder / "shards", "test")
    windows = centred_windows(tiny_demo["genome"], test.loc[data.pair_id])
    with torch.no_grad():
        expected = torch.sigmoid(model(windows["enhancer"], windows["promoter"])).numpy()
    scores, labels, ids = predict_split(model.to(device), data, 16, torch.device(device))
    assert len(ids) == len(test) > 20 and scores.dtype == np.float32
    np.testing.assert_array_equal(ids, data.pair_id)
    np.testing.assert_array_equal(labels, test.loc[ids, "label"])
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-6 if device == "cpu" else 2e-2)
    assert expected.std() > 1e-3  # the scores differ between pairs: the comparison is not of constants


def test_scores_do_not_depend_on_the_batch_size(trained_cells):
    folder = trained_cells["demo_b"]
    model, _ = load_trained_model(folder / "linear")
    data = load_split(folder / "shards", "val")
    whole, _, whole_ids = predict_split(model, data, 256, torch.device("cpu"))
    small, _, small_ids = predict_split(model, data, 7, torch.device("cpu"))
    np.testing.assert_array_equal(small_ids, whole_ids)
    np.testing.assert_allclose(small, whole, rtol=0, atol=1e-6)


NO_GPU_SELECTION = """
import logging, sys, torch
from epiformer.inference.devices import select_device
logging.basicConfig(stream=sys.stdout, level=logging.WARNING)
assert not torch.cuda.is_available()
print("auto ->", select_device("auto"))
try:
    select_device("cuda")
except RuntimeError as error:
    print("cuda ->", error)
"""


@pytest.mark.parametrize(
    "device, processes, label",
    [("cpu", 1, "cpu"), ("cuda:1", 1, "cuda:1"), ("cuda", 4, "cuda x 4"), ("cpu", 2, "cpu x 2")],
)
def test_a_device_label_names_its_kind_of_device(device, processes, label):
    assert device_label(torch.device(device), processes) == label
    assert labelled_device_type(label) == torch.device(device).type


def test_select_device_falls_back_to_the_cpu_loudly_and_refuses_cuda_without_a_gpu():
    """Run where no GPU is visible (CUDA_VISIBLE_DEVICES empty), so that GPU machines test this path too."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", NO_GPU_SELECTION], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No CUDA GPU found: running on the CPU" in done.stdout and "auto -> cpu" in done.stdout
    assert "cuda -> train.device is 'cuda' but no CUDA GPU is visible. Use 'auto' or 'cpu'" in done.stdout


def test_select_device_takes_what_it_is_asked_for():
    assert select_device("cpu") == torch.device("cpu")
    if torch.cuda.is_available():
        assert select_device("cuda") == select_device("auto") == torch.device("cuda")


def test_cpu_runs_in_float32():
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(64, 64, generator=generator) for _ in range(2))
    with mixed_precision(torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")
        product = a @ b
    assert product.dtype == torch.float32 and torch.equal(product, a @ b)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what the checks above would see under CPU autocast
        assert torch.is_autocast_enabled("cpu") and (a @ b).dtype == torch.bfloat16


@pytest.mark.gpu
def test_cuda_runs_in_bf16_autocast():
    a, b = (torch.randn(64, 64, device="cuda") for _ in range(2))
    with mixed_precision(torch.device("cuda")):
        assert torch.is_autocast_enabled("cuda")
        assert (a @ b).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cuda") and (a @ b).dtype == torch.float32
