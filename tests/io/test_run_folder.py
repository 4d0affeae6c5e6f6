"""A run of one's own data in its own folder: `epiformer init`, a config of samples and genomes only, schema
errors in a sentence. The dry runs are real Snakemake runs of the checkout's workflow."""

import re
from pathlib import Path

import numpy as np
import pytest

from epiformer.cli import main
from epiformer.io.run_folder import InitError, init_run_folder
from tests.helpers import REPO, job_counts, snakemake


@pytest.fixture
def own_data(tmp_path) -> tuple[Path, Path]:
    """A genome of four 60 kb chromosomes and 40 labelled pairs on each, in TargetFinder's CSV."""
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    fasta, pairs = data / "genome.fa", data / "pairs.csv"
    with fasta.open("w") as out:
        for chrom in ("chr1", "chr2", "chr3", "chr4"):
            bases = "".join(rng.choice(list("ACGT"), 60_000))
            out.write(f">{chrom}\n" + "".join(bases[i : i + 60] + "\n" for i in range(0, len(bases), 60)))
    rows = ["enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label"]
    for chrom in ("chr1", "chr2", "chr3", "chr4"):
        for _ in range(40):
            enhancer = int(rng.integers(4_000, 25_000))
            promoter = enhancer + int(rng.integers(3_000, 25_000))
            rows.append(f"{chrom},{enhancer},{enhancer + 500},{chrom},{promoter},{promoter + 1000},{rng.integers(2)}")
    pairs.write_text("\n".join(rows) + "\n")
    return fasta, pairs


def dry_run(folder: Path, *args: str):
    return snakemake(folder, "-s", str(REPO / "Snakefile"), "-n", *args, timeout=300)


def test_init_gives_a_run_folder_that_plans_only_its_own_cell_lines(own_data, tmp_path):
    fasta, pairs = own_data
    folder = tmp_path / "runs" / "mine"
    assert main(["init", str(folder), "--genome", f"mine={fasta}", "--pairs", f"K1={pairs}", "--pairs",
                 f"K2={pairs}", "--val", "chr3", "--test", "chr4"]) == 0  # fmt: skip
    sheet = (folder / "config" / "samples.tsv").read_text().splitlines()
    assert sheet == ["cell_line\tpairs\tgenome", f"K1\t{pairs}\tmine", f"K2\t{pairs}\tmine"]
    run = dry_run(folder)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    jobs = job_counts(run.stdout)
    assert jobs["windows"] == 2 and jobs["train"] == 4  # its two cell lines, M7 and softmax on each
    assert "demo_data" not in jobs and "demo_a" not in run.stdout
    assert main(["init", str(folder), "--genome", f"mine={fasta}", "--pairs", f"K3={pairs}"]) == 1  # no overwrite
    assert "K3" not in (folder / "config" / "samples.tsv").read_text()


def test_init_refuses_a_missing_file_or_a_name_that_cannot_be_a_folder(own_data, tmp_path):
    fasta, pairs = own_data
    with pytest.raises(InitError, match=r"--genome: .*nowhere\.fa is not a file"):
        init_run_folder(tmp_path / "a", ("mine", str(tmp_path / "nowhere.fa")), {"K1": str(pairs)})
    with pytest.raises(ValueError, match=r"--pairs: cell line 'K 1' cannot name a results folder.*'K_1'"):
        init_run_folder(tmp_path / "a", ("mine", str(fasta)), {"K 1": str(pairs)})
    assert not (tmp_path / "a").exists()


def test_a_config_of_samples_and_genomes_only_runs_at_the_defaults_and_asks_for_the_split(own_data, tmp_path):
    fasta, pairs = own_data
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "samples.tsv").write_text(f"cell_line\tpairs\tgenome\nK1\t{pairs}\tmine\n")
    config = tmp_path / "config" / "config.yaml"
    config.write_text(f"samples: config/samples.tsv\ngenomes:\n  mine: {fasta}\n")
    run = dry_run(tmp_path)
    assert run.returncode != 0 and "split.val_chromosomes is empty" in run.stdout + run.stderr
    config.write_text(config.read_text() + "split: {val_chromosomes: [chr3], test_chromosomes: [chr4]}\n")
    run = dry_run(tmp_path)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert job_counts(run.stdout)["train"] == 2


@pytest.mark.parametrize(
    "setting, message",
    [
        ("windows: {enhancer_widht: 3000}", r"config: windows: Additional properties .*'enhancer_widht'.* misspelt"),
        ("train: {device: gpu}", r"config: train\.device: 'gpu' is not one of \['auto', 'cpu', 'cuda'\]"),
    ],
)
def test_a_schema_error_is_one_sentence_naming_the_key_and_the_fix(tmp_path, setting, message):
    (tmp_path / "bad.yaml").write_text(setting + "\n")
    (tmp_path / "config").symlink_to(REPO / "config")
    run = dry_run(tmp_path, "--configfile", str(tmp_path / "bad.yaml"))
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert len(output) < 2000 and "Failed validating" not in output  # not the schema dump
    assert re.search(message, output), output
