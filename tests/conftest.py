"""Shared fixtures: tiny real files made on the fly (FASTA, pair tables, shards)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

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
