"""A real Snakemake run of a tiny config, the way a user runs it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.conftest import snakemake, tiny_config


def test_every_output_exists_for_both_cell_lines_and_models(finished):
    results = finished / "results"
    for cell in ("demo_a", "demo_b"):
        assert (results / cell / "windows.tsv").exists() and (results / cell / "shards" / "manifest.json").exists()
        audit = pd.read_csv(results / cell / "split_audit.tsv", sep="\t")
        assert audit[["overlapping_windows", "shared_elements"]].to_numpy().sum() == 0  # chromosome split: nothing shared
        for model in ("linear", "softmax"):
            folder = results / cell / model
            for name in ("model.safetensors", "model.json", "train_log.tsv", "predictions.tsv", "metrics.json"):
                assert (folder / name).stat().st_size > 0, folder / name
            metrics = json.loads((folder / "metrics.json").read_text())
            predictions = pd.read_csv(folder / "predictions.tsv", sep="\t")
            assert metrics["n_test"] == len(predictions) and set(predictions.columns) == {"pair_id", "label", "score"}
            assert predictions["score"].between(0, 1).all()
            assert (results / "plots" / cell / f"{model}.training.png").stat().st_size > 1000
        assert (results / "plots" / cell / "roc_pr.png").stat().st_size > 1000
    summary = pd.read_csv(results / "summary.tsv", sep="\t")
    assert len(summary) == 4 and summary["oracle_auroc"].between(0.5, 1).all()


def test_windows_follow_the_design_rule(finished):
    windows = pd.read_csv(finished / "results" / "demo_a" / "windows.tsv", sep="\t")
    pairs = pd.read_csv(finished / "resources" / "demo" / "demo_a.pairs.csv").iloc[windows["pair_id"]]
    centre = (pairs["enhancer_start"].to_numpy() + pairs["enhancer_end"].to_numpy()) // 2
    assert ((windows["enhancer_start"] == centre - 32) & (windows["enhancer_end"] == centre + 32)).all()
    assert set(windows.loc[windows.split == "test", "enhancer_chrom"]) == {"chr3"}


def test_rerun_has_nothing_to_do_and_report_builds(finished):
    dry = snakemake(finished, "-n")
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
    report = snakemake(finished, "--report", "results/report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    html = (finished / "results" / "report.html").read_text(errors="replace")
    assert "roc_pr.png" in html and "summary.tsv" in html


def test_changing_one_model_reruns_only_that_model(finished):
    path = finished / "config" / "config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    config["models"]["softmax"]["d_ff"] = 48
    path.write_text(yaml.safe_dump(config))
    try:
        jobs = snakemake(finished, "-n").stdout
    finally:
        path.write_text(original)  # the finished run is shared with other test modules
    assert "wildcards: cell=demo_a, model=softmax" in jobs and "model=linear" not in jobs


def test_bad_config_is_rejected_before_any_job(workdir, tmp_path):
    config = tiny_config()
    config["split"]["mode"] = "sideways"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    run = snakemake(workdir, "-n", "--configfile", str(bad))
    assert run.returncode != 0 and "sideways" in run.stdout + run.stderr


@pytest.mark.parametrize(
    "sheet, message",
    [
        ("cell_line\tpairs\nx\tp.csv\n", "genome"),  # required column missing
        ("cell_line\tpairs\tgenome\nbad name\tp.csv\tdemo\n", "bad name"),  # not usable in a path
        ("cell_line\tpairs\tgenome\nx\tp.csv\thg38\n", "hg38"),  # genome not configured
    ],
)
def test_bad_sample_sheet_is_rejected_before_any_job(workdir, tmp_path, sheet, message):
    config = tiny_config()
    config["samples"] = str(tmp_path / "samples.tsv")
    (tmp_path / "samples.tsv").write_text(sheet)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(workdir, "-n", "--configfile", str(tmp_path / "config.yaml"))
    assert run.returncode != 0 and message in run.stdout + run.stderr
    assert "Job stats" not in run.stdout
