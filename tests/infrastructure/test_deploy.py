"""The workflow run from a user's own folder, the way catalog workflows are deployed.

Two ways, both from a temporary folder outside the checkout that holds only the user's
config/ (and data): `snakemake -s /path/to/epiformer/Snakefile`, and a Snakefile of the
user's own that loads epiformer as a `module`. The workflow's own files (docs/, scripts/,
envs/, schemas, captions, package source) must be found beside the workflow; config, data,
results and logs stay in the user's folder.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from epiformer.synthetic.demo import generate_demo
from tests.helpers import REPO, TINY_DEMO, job_counts, require_bedtools, snakemake, tiny_config, write_config

DEPLOYMENTS = ("snakefile", "module")

MODULE_SNAKEFILE = """\
configfile: "config/config.yaml"


module epiformer:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from epiformer
"""


def make_user_folder(folder: Path, deployment: str, config: dict, workflow: Path = REPO) -> Path:
    """A user's folder: config/ (the tiny demo config, the sample sheet) and, as a module, a Snakefile."""
    assert not folder.resolve().is_relative_to(REPO)
    write_config(folder, config)
    if deployment == "module":
        (folder / "Snakefile").write_text(MODULE_SNAKEFILE.format(snakefile=workflow / "Snakefile"))
    return folder


def run(folder: Path, deployment: str, *args: str, workflow: Path = REPO) -> subprocess.CompletedProcess:
    snakefile = ["-s", str(workflow / "Snakefile")] if deployment == "snakefile" else []
    return snakemake(folder, *snakefile, *args, cores=1, timeout=300)


def written_during(path: Path, start: float) -> bool:
    # The checkout may hold results of its own (`make demo` there); only this run's writes count.
    return path.exists() and path.stat().st_mtime >= start


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_dry_run_of_all_plans_every_stage_from_a_user_folder(tmp_path, deployment):
    folder = make_user_folder(tmp_path / "analysis", deployment, tiny_config())
    dry = run(folder, deployment, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    output = dry.stdout + dry.stderr
    assert "Error" not in output and "Exception" not in output
    counts = job_counts(dry.stdout)
    expected = {
        "demo_data": 1,
        "index_genome": 1,
        "windows": 2,
        "encode": 2,
        "train": 4,
        "validate": 4,  # each model's validation split alone, then the choice, then the test splits
        "selection": 1,
        "evaluate": 4,
        "baseline": 8,  # four baselines, two cell lines
        "transfer": 2,
        "plot_scaling_reference": 1,
        "summary": 1,
        "all": 1,
    }
    assert {rule: counts.get(rule) for rule in expected} == expected
    # The reference table is the checkout's, not one looked up in the user's folder.
    assert f"{REPO}/workflow/rules/../../docs/scaling_cpu.tsv" in dry.stdout
    assert not (folder / "docs").exists()


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_built_in_demo_runs_from_a_user_folder_and_writes_only_there(tmp_path, deployment):
    require_bedtools()
    folder = make_user_folder(tmp_path / "analysis", deployment, tiny_config())
    start = time.time() - 1
    done = run(folder, deployment, "results/demo_a/windows.tsv", "results/plots/scaling_reference.png")
    assert done.returncode == 0, done.stderr[-3000:]
    genome = folder / "resources" / "demo" / "genome.fa"
    assert genome.read_text().count(">") == TINY_DEMO.n_chromosomes  # made from the user's config
    outputs = [
        "results/demo_a/windows.tsv",
        "results/demo_a/split_audit.tsv",
        "results/plots/scaling_reference.png",
        "resources/demo/genome.fa.fai",
    ]
    logs = ["logs/demo/demo_data.log", "logs/demo_a/windows.log", "logs/plot_scaling_reference.log"]
    for name in outputs + logs:
        assert (folder / name).exists() and not written_during(REPO / name, start), name
    assert all((folder / name).stat().st_size > 0 for name in outputs)
    # A relative genome path: index_genome's log lies beside the index, in the user's folder.
    assert "index" in (folder / "resources" / "demo" / "genome.fa.fai.log").read_text().lower()
    assert not (folder / "logs" / "index_genome").exists()
    assert (folder / "results" / "plots" / "scaling_reference.png").read_bytes()[:4] == b"\x89PNG"
    again = run(folder, deployment, "-n", "results/demo_a/windows.tsv", "results/plots/scaling_reference.png")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_absolute_genome_path_is_indexed_with_its_log_beside_the_index(tmp_path, deployment):
    require_bedtools()
    reference = generate_demo(tmp_path / "reference", TINY_DEMO)  # a genome elsewhere, given by absolute path
    genome = reference["genome"].resolve()
    config = tiny_config()
    config["genomes"] = {"hg_test": str(genome)}
    folder = make_user_folder(tmp_path / "analysis", deployment, config)
    sheet = f"cell_line\tpairs\tgenome\ndemo_a\t{reference['demo_a']}\thg_test\n"
    (folder / "config" / "samples.tsv").write_text(sheet)
    dry = run(folder, deployment, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = job_counts(dry.stdout)
    assert counts["index_genome"] == 1 and counts["windows"] == 1 and "demo_data" not in counts
    assert f"log: {genome}.fai.log" in dry.stdout and "//" not in re.sub(r"\w+://", "", dry.stdout)
    done = run(folder, deployment, "results/demo_a/windows.tsv")
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(f"{genome}.fai").stat().st_size > 0 and Path(f"{genome}.fai.log").stat().st_size > 0
    assert (folder / "results" / "demo_a" / "windows.tsv").stat().st_size > 0
    assert not (folder / "logs" / "index_genome").exists() and not (folder / "resources").exists()


WORKFLOW_FILES = (
    "Snakefile",
    "workflow",
    "scripts",
    "envs",
    "docs",
    "pyproject.toml",
    "src/epiformer/synthetic/demo.py",
    "src/epiformer/synthetic/demo_long.py",
    "src/epiformer/synthetic/demo_scale.py",
    "src/epiformer/sequence/motifs.py",
)


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_editing_the_deployed_demo_generator_remakes_the_demo(tmp_path, deployment):
    # A copy of the workflow, so that its package source can be edited; the checksum of that
    # source (not of files in the user's folder) decides whether the demo is re-made.
    workflow = tmp_path / "epiformer"
    for name in WORKFLOW_FILES:
        (workflow / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, workflow / name)
    folder = make_user_folder(tmp_path / "analysis", deployment, tiny_config(), workflow=workflow)
    done = run(folder, deployment, "demo_data", workflow=workflow)
    assert done.returncode == 0, done.stderr[-3000:]
    unchanged = run(folder, deployment, "-n", "demo_data", workflow=workflow)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr
    with open(workflow / "src" / "epiformer" / "sequence" / "motifs.py", "a") as handle:
        handle.write("\n# an edit to the generator\n")
    edited = run(folder, deployment, "-n", "demo_data", workflow=workflow)
    assert edited.returncode == 0 and job_counts(edited.stdout) == {"demo_data": 1}


def test_requires_python_admits_no_python_a_pinned_package_rejects():
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    lowest = re.fullmatch(r">=\s*(3\.\d+)", requires).group(1)
    pins = [line.split("==")[0] for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line]
    checked = 0
    for name in pins:
        try:
            spec = importlib.metadata.metadata(name).get("Requires-Python")
        except importlib.metadata.PackageNotFoundError:
            continue  # pinned for another platform or extra
        if spec:
            assert SpecifierSet(spec).contains(lowest), f"{name} needs Python {spec}; pyproject.toml says {requires}"
            checked += 1
    assert checked > 20
    assert f"Python ≥ {lowest}" in (REPO / "README.md").read_text()


def test_workflow_catalog_settings_name_files_that_exist():
    """.snakemake-workflow-catalog.yml: the usage the Snakemake workflow catalog shows."""
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert usage["software-stack-deployment"] == {"conda": True, "apptainer": False, "apptainer+conda": False}
    assert usage["report"] is True and usage["mandatory-flags"]["flags"] == []
    named = re.findall(r"\b(?:config|profiles|docs)/[\w./]*\w", usage["mandatory-flags"]["desc"])
    assert len(named) >= 6
    for path in named:
        assert (REPO / path).exists(), f".snakemake-workflow-catalog.yml names {path}, which does not exist"
