"""Shared fixtures: tiny real files made on the fly (FASTA, demo data, shards, a finished workflow run).

Fixtures are injected by name; the plain helpers they use are in tests/helpers.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from epiformer.demo import DemoSpec, generate_demo
from tests.helpers import TINY_DEMO, copy_workflow, require_bedtools, run_workflow, tiny_config


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
