"""Shared fixtures: tiny real files made on the fly (FASTA, pair tables, shards)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from epiformer.demo import DemoSpec, generate_demo

TINY_DEMO = DemoSpec(n_chromosomes=3, chromosome_length=200_000, positives_per_cell=60)


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory):
    """A small demo: ~0.6 Mb genome, 240 pairs per cell line (paths by name)."""
    return generate_demo(tmp_path_factory.mktemp("demo"), TINY_DEMO)


@pytest.fixture(scope="session")
def full_demo(tmp_path_factory):
    """The default demo (4.8 Mb genome, 6,000 pairs per cell line)."""
    return generate_demo(tmp_path_factory.mktemp("full"), DemoSpec())


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


def require_bedtools():
    if shutil.which("bedtools") is None:
        pytest.fail("bedtools is not installed: run `sudo apt-get install -y bedtools` (make test does it as root)")


# A real Snakemake run of a tiny config, shared by every test that needs finished outputs.
REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TINY_MODEL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "patch_size": 4, "kernel_size": 8, "dropout": 0.0}


def tiny_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["demo"].update(n_chromosomes=3, chromosome_length=200_000, positives_per_cell=60)
    config["windows"].update(enhancer_width=64, promoter_width=48)
    config["split"].update(val_chromosomes=["chr2"], test_chromosomes=["chr3"])
    config["models"] = {name: {"attention": name, **TINY_MODEL} for name in ("linear", "softmax")}
    config["train"].update(epochs=1, batch_size=16)
    config["evaluate"]["bootstrap"] = 20
    return config


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    require_bedtools()
    work = tmp_path_factory.mktemp("workflow")
    for name in ("Snakefile", "workflow", "scripts", "envs"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    (work / "docs").mkdir()
    shutil.copy(REPO / "docs" / "scaling_cpu.tsv", work / "docs")  # the report's reference scaling figure
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(tiny_config()))
    shutil.copy(REPO / "config" / "samples.tsv", work / "config" / "samples.tsv")
    return work


def snakemake(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SNAKEMAKE, "--cores", "2", *args], cwd=workdir, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def finished(workdir):
    run = snakemake(workdir)
    assert run.returncode == 0, run.stderr[-5000:]
    return workdir
