"""Shared fixtures: tiny real files made on the fly (FASTA, demo data, shards, a finished workflow run).

Fixtures are injected by name; the plain helpers they use are in tests/helpers.py. Tests
marked `gpu` (and the cuda case of the `device` fixture) are skipped here, in one place,
when no CUDA GPU is visible.
"""

from __future__ import annotations

import numpy as np
import pytest

from epiformer.data.encode import encode_shards
from epiformer.data.splits import SplitSpec
from epiformer.synthetic.demo import DemoSpec, generate_demo
from tests.helpers import (
    TINY_DEMO,
    TINY_LONG_DEMO,
    TINY_MODEL,
    copy_workflow,
    require_bedtools,
    run_workflow,
    tiny_config,
    windows_and_shards,
    windows_frame,
)

NO_GPU = "needs a CUDA GPU and torch.cuda.is_available() is False here"


def pytest_collection_modifyitems(config, items):
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_tests:
        return
    import torch  # only when a collected test needs it: most modules import no PyTorch

    if not torch.cuda.is_available():
        for item in gpu_tests:
            item.add_marker(pytest.mark.skip(reason=NO_GPU))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    """Each device there is: the CPU always, CUDA where a GPU is visible (else that case is skipped)."""
    return request.param


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory):
    """A small demo: ~0.6 Mb genome, 240 pairs per cell line (paths by name)."""
    return generate_demo(tmp_path_factory.mktemp("demo"), TINY_DEMO)


@pytest.fixture(scope="session")
def full_demo(tmp_path_factory):
    """The default demo (4.8 Mb genome, 6,000 pairs per cell line)."""
    return generate_demo(tmp_path_factory.mktemp("full"), DemoSpec())


@pytest.fixture(scope="session")
def tiny_long_demo(tmp_path_factory):
    """The insulated long demo at test size: 90 pairs 3-20 kb apart on three chromosomes (~2 Mb)."""
    from epiformer.synthetic.demo_long import generate_long_demo

    return generate_long_demo(tmp_path_factory.mktemp("long"), TINY_LONG_DEMO)


@pytest.fixture
def small_fasta(tmp_path):
    """Two chromosomes with lowercase and non-ACGT bases; returns (path, sequences)."""
    rng = np.random.default_rng(1)
    sequences = {
        "chrA": "".join(rng.choice(list("ACGT"), 500)),
        "chrB": "".join(rng.choice(list("ACGTacgtNRY"), 300)),
    }
    path = tmp_path / "small.fa"
    with open(path, "w") as handle:
        for name, seq in sequences.items():
            handle.write(f">{name}\n")
            handle.writelines(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))
    return path, sequences


@pytest.fixture
def small_shards(small_fasta, tmp_path):
    """47 training pairs of small_fasta in shards of 7 with a 2-base flank; (FASTA path, windows, shard folder)."""
    path, _ = small_fasta
    rows = [("chrA", s, s + 12, "chrB", 200 - s // 3, 212 - s // 3) for s in range(0, 470, 10)]
    windows = windows_frame(rows)
    encode_shards(windows, path, tmp_path / "shards", flank=2, shard_size=7)
    return path, windows, tmp_path / "shards"


@pytest.fixture(scope="session")
def trained_cells(tiny_demo, tmp_path_factory):
    """Both tiny demo cell lines as training leaves them: windows.tsv, shards/ (test split chr3) and
    linear/, a tiny linear model trained for two epochs by train_model; cell line -> folder."""
    from epiformer.model.transformer import ModelConfig  # PyTorch only where a test asks for a trained model
    from epiformer.training.train import TrainConfig, train_model

    split = SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",))
    training = TrainConfig(epochs=2, batch_size=16, learning_rate=3e-3, device="cpu")
    folders = {}
    for cell in ("demo_a", "demo_b"):
        folder = windows_and_shards(tiny_demo, cell, split, tmp_path_factory.mktemp(cell))
        train_model(folder / "shards", ModelConfig(**TINY_MODEL), training, folder / "linear", folder / "checkpoint")
        folders[cell] = folder
    return folders


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """A copy of the workflow configured by tiny_config(), not yet run."""
    require_bedtools()
    return copy_workflow(tmp_path_factory.mktemp("workflow"), tiny_config())


@pytest.fixture(scope="session")
def finished(workdir):
    """`workdir` after a real Snakemake run of every target, shared by every test that needs finished outputs."""
    run_workflow(workdir)
    return workdir
