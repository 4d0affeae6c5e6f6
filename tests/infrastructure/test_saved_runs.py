"""Every published number recomputed from the saved run files (docs/results/runs/*/results/, issue 39).

`python docs/results/write_tables.py PAGE RESULTS` keeps, beside a run's tables, each model's and
baseline's test predictions (ensembles: each replicate's too), the test pairs' windows and truth, the
commit and the config files. From them alone, with the package's metric functions and the run's own
`evaluate:` settings, this recomputes each model's metrics.json figures, the summary, the paired
differences and the distance bins, and finds them equal to the published files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from epiformer.evaluation.metrics import compute_metrics
from epiformer.evaluation.summary import results_in_folder, write_summary
from tests.helpers import REPO

RUNS = REPO / "docs" / "results" / "runs"
SAVED = sorted(path.parent for path in RUNS.glob("*/results") if (path.parent / "provenance.json").is_file())
EVALUATE_DEFAULTS = {"bootstrap": 1000, "seed": 0, "bootstrap_unit": "pair", "distance_bins": 5, "distance_strata": 10}


def merged(base: dict, overlay: dict) -> dict:
    """Snakemake's --configfile overlay: nested mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def evaluate_settings(run) -> dict:
    """The run's `evaluate:` block, from the config files its provenance.json keeps, in their order."""
    config: dict = {}
    for text in json.loads((run / "provenance.json").read_text())["config_files"].values():
        config = merged(config, yaml.safe_load(text) or {})
    return {**EVALUATE_DEFAULTS, **config.get("evaluate", {})}


def test_some_published_run_is_saved_recomputable():
    assert SAVED, "no docs/results/runs/*/ keeps its predictions: save one with docs/results/write_tables.py"
    for run in SAVED:
        provenance = json.loads((run / "provenance.json").read_text())
        assert len(provenance["commit"]) == 40 and provenance["config_files"]


@pytest.mark.parametrize("run", SAVED, ids=[run.name for run in SAVED])
def test_each_models_metrics_are_what_its_saved_predictions_give(run):
    settings = evaluate_settings(run)
    for metrics_path in sorted((run / "results").glob("*/*/metrics.json")):
        folder, published = metrics_path.parent, json.loads(metrics_path.read_text())
        test = pd.read_csv(folder / "predictions.tsv.gz", sep="\t")
        windows = pd.read_csv(folder.parent / "windows.tsv.gz", sep="\t")
        unit = published.get("bootstrap_unit", "pair")
        assert unit in ("pair", settings["bootstrap_unit"])
        again = compute_metrics(test, None, settings["bootstrap"], settings["seed"], windows, unit)
        for key in ("n_test", "positives", "auroc", "auprc", "auroc_ci95", "auprc_ci95", "bootstrap_groups"):
            assert again[key] == published[key], (folder, key)
        for key in ("auprc_trapezoid", "auprc_trapezoid_ci95", "precision_at_70_recall"):
            if key in published:  # NaN where undefined (a constant score has no precision-recall curve)
                np.testing.assert_array_equal(again[key], published[key], err_msg=f"{folder} {key}")
        replicates = published.get("replicates") or []
        if replicates:
            frames = [pd.read_csv(folder / r["replicate"] / "predictions.tsv.gz", sep="\t") for r in replicates]
            for replicate, frame in zip(replicates, frames):
                assert frame["pair_id"].tolist() == test["pair_id"].tolist()
                one = compute_metrics(frame, None, 0, 0)
                assert (one["auroc"], one["auprc"]) == (replicate["auroc"], replicate["auprc"]), (folder, replicate)
            # The ensemble scores each pair by its replicates' mean probability (as written, to 7 digits or so).
            mean = np.mean([frame["score"].to_numpy() for frame in frames], axis=0)
            np.testing.assert_allclose(test["score"].to_numpy(), mean, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("run", SAVED, ids=[run.name for run in SAVED])
def test_the_summary_paired_differences_and_distance_bins_are_what_the_saved_files_give(run, tmp_path):
    settings = evaluate_settings(run)
    order = list(dict.fromkeys(pd.read_csv(run / "summary.tsv", sep="\t")["model"]))  # the run's: config order
    results = results_in_folder(run / "results", order)
    write_summary(
        results,
        tmp_path / "summary.tsv",
        tmp_path / "summary.md",
        paired_path=tmp_path / "paired_comparison.tsv",
        resamples=settings["bootstrap"],
        seed=settings["seed"],
        distance_bins_path=tmp_path / "distance_bins.tsv",
        distance_bins=settings["distance_bins"],
        distance_strata=settings["distance_strata"],
        bootstrap_unit=settings["bootstrap_unit"],
        selection=selection if (selection := run / "results" / "selection.tsv").is_file() else None,
    )
    keys = {
        "summary.tsv": ["cell_line", "model"],
        "paired_comparison.tsv": ["cell_line", "model", "baseline", "metric"],
        "distance_bins.tsv": None,
    }
    for name, key in keys.items():
        published = pd.read_csv(run / name, sep="\t", dtype=str, keep_default_na=False)
        again = pd.read_csv(tmp_path / name, sep="\t", dtype=str, keep_default_na=False)
        if key is None:  # distance bins: rows by model, bin and metric
            key = [column for column in ("cell_line", "model", "bin", "metric") if column in published.columns]
        assert list(again.columns) == list(published.columns), name
        published, again = (frame.sort_values(key).reset_index(drop=True) for frame in (published, again))
        pd.testing.assert_frame_equal(again, published, obj=f"{run.name}/{name}")


CHOSEN = [run for run in SAVED if (run / "results" / "selection.tsv").is_file()]


@pytest.mark.parametrize("run", CHOSEN, ids=[run.name for run in CHOSEN])
def test_the_runs_choice_is_what_its_saved_validation_predictions_give(run, tmp_path):
    from epiformer.evaluation.selection import ValidationResult, read_selection, write_selection

    published = read_selection(run / "results" / "selection.tsv")
    saved = run / "results"

    def model_dir(cell: str, model: str) -> Path:  # a pooled model's model.json lies in pooled/MODEL/, as run
        return saved / cell / model if (saved / cell / model / "model.json").is_file() else saved / "pooled" / model

    results = [
        ValidationResult(
            row.cell_line,
            row.model,
            saved / row.cell_line / row.model / "validation_predictions.tsv.gz",
            model_dir(row.cell_line, row.model),
        )
        for row in published.itertuples()
    ]
    again = write_selection(results, tmp_path / "selection.tsv")
    pd.testing.assert_frame_equal(again, published, check_dtype=False, atol=1e-6)
