"""A real Snakemake run of a tiny config, the way a user runs it."""

from __future__ import annotations

import json
import re
import shutil

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import average_precision_score, roc_auc_score

from tests.helpers import (
    REPO,
    assert_figure,
    browser,
    independent_paired_interval,
    open_in_browser,
    report_description,
    report_file,
    report_results,
    snakemake,
    tiny_config,
    visible_text,
)


def test_every_output_exists_for_both_cell_lines_and_models(finished):
    results = finished / "results"
    for cell in ("demo_a", "demo_b"):
        assert (results / cell / "windows.tsv").exists() and (results / cell / "shards" / "manifest.json").exists()
        audit = pd.read_csv(results / cell / "split_audit.tsv", sep="\t")
        assert (
            audit[["overlapping_windows", "shared_elements"]].to_numpy().sum() == 0
        )  # chromosome split: nothing shared
        for model in ("linear", "softmax"):
            folder = results / cell / model
            for name in ("model.safetensors", "model.json", "train_log.tsv", "predictions.tsv", "metrics.json"):
                assert (folder / name).stat().st_size > 0, folder / name
            metrics = json.loads((folder / "metrics.json").read_text())
            predictions = pd.read_csv(folder / "predictions.tsv", sep="\t")
            assert metrics["n_test"] == len(predictions) and set(predictions.columns) == {"pair_id", "label", "score"}
            assert predictions["score"].between(0, 1).all()
            assert_figure(results / "plots" / cell / f"{model}.training.png")
        assert_figure(results / "plots" / cell / "roc_pr.png")
    summary = pd.read_csv(results / "summary.tsv", sep="\t")
    assert len(summary) == 2 * 6 and summary["oracle_auroc"].between(0.5, 1).all()  # two models, four baselines


MODELS, BASELINES = ("linear", "softmax"), ("distance", "kmer", "distance_kmer", "propensity")


def test_baselines_transfer_and_figures_are_written_for_every_cell_line(finished):
    results = finished / "results"
    for cell in ("demo_a", "demo_b"):
        test_ids = set(pd.read_csv(results / cell / "linear" / "predictions.tsv", sep="\t")["pair_id"])
        for baseline in BASELINES:
            predictions = pd.read_csv(results / cell / baseline / "predictions.tsv", sep="\t")
            assert set(predictions["pair_id"]) == test_ids  # exactly the same test pairs as the models
        for figure in ("roc_pr", "calibration", "linear.training", "softmax.training"):
            assert_figure(results / "plots" / cell / f"{figure}.png")
    for figure in ("comparison", "scaling_reference", "transfer/linear", "transfer/softmax"):
        assert_figure(results / "plots" / f"{figure}.png")
    summary = pd.read_csv(results / "summary.tsv", sep="\t")
    assert sorted(summary["model"].unique()) == sorted(MODELS + BASELINES) and len(summary) == 2 * 6
    assert set(summary.loc[summary["kind"] == "baseline", "model"]) == set(BASELINES)


def test_metrics_within_distance_bins_are_in_the_summary_table_figure_and_report(finished):
    from epiformer.evaluation.distance import binned_metrics, distance_strata, matched_auroc

    results = finished / "results"
    bins = pd.read_csv(results / "distance_bins.tsv", sep="\t")
    summary = pd.read_csv(results / "summary.tsv", sep="\t").set_index(["cell_line", "model"])
    for cell in ("demo_a", "demo_b"):
        windows = pd.read_csv(results / cell / "windows.tsv", sep="\t")
        for model in MODELS + BASELINES:
            frame = pd.read_csv(results / cell / model / "predictions.tsv", sep="\t").merge(
                windows[["pair_id", "distance"]]
            )
            labels, scores, distances = (
                frame["label"].to_numpy(),
                frame["score"].to_numpy(),
                frame["distance"].to_numpy(),
            )
            expected = binned_metrics(labels, scores, distances, 5)  # evaluate.distance_bins: quintiles
            written = bins.query("cell_line == @cell and model == @model")
            assert list(written["n_test"]) == list(expected["n_test"]) and written["n_test"].sum() == len(frame)
            np.testing.assert_allclose(written["auroc"], expected["auroc"], atol=1e-3)  # %.4g in the table
            matched = matched_auroc(labels, scores, distance_strata(distances, 10))
            assert summary.loc[(cell, model), "matched_auroc"] == pytest.approx(matched, abs=1e-3)
    assert summary.loc[("demo_a", "linear"), "matched_auroc_diff_distance"] == pytest.approx(
        summary.loc[("demo_a", "linear"), "matched_auroc"] - summary.loc[("demo_a", "distance"), "matched_auroc"],
        abs=2e-3,
    )
    assert_figure(results / "plots" / "distance_bins.png")
    assert "## Within distance" in (results / "summary.md").read_text()
    assert "AUROC and AUPRC within distance bins of the test pairs" in (results / "distance_bins.html").read_text()


def test_every_metric_equals_scikit_learn_on_predictions_tsv(finished):
    from sklearn.metrics import (
        average_precision_score,
        balanced_accuracy_score,
        f1_score,
        matthews_corrcoef,
        roc_auc_score,
    )

    for cell in ("demo_a", "demo_b"):
        for model in MODELS + BASELINES:
            metrics = json.loads((finished / "results" / cell / model / "metrics.json").read_text())
            frame = pd.read_csv(finished / "results" / cell / model / "predictions.tsv", sep="\t")
            labels, scores = frame["label"], frame["score"]
            # Scores are stored exactly: the published metrics recompute from the published file.
            predicted = scores >= metrics["threshold"]
            assert metrics["auroc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-9)
            assert metrics["auprc"] == pytest.approx(average_precision_score(labels, scores), abs=1e-9)
            assert metrics["f1"] == pytest.approx(f1_score(labels, predicted), abs=1e-9)
            assert metrics["mcc"] == pytest.approx(matthews_corrcoef(labels, predicted), abs=1e-9)
            assert metrics["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(labels, predicted), abs=1e-9)
            assert (metrics["n_test"], metrics["positives"]) == (len(frame), labels.sum())
            assert metrics["negatives"] == (labels == 0).sum() and metrics["prevalence"] == pytest.approx(labels.mean())
            for name in ("auroc", "auprc"):
                low, high = metrics[f"{name}_ci95"]
                assert low <= metrics[name] <= high
            assert metrics["split"] == {"mode": "chromosome", "leak_prone": False}


def test_transfer_diagonal_equals_each_models_own_test_metrics(finished):
    for model in MODELS:
        table = pd.read_csv(finished / "results" / "transfer" / f"{model}.tsv", sep="\t")
        assert len(table) == 4 and set(table["train_cell"]) == set(table["test_cell"]) == {"demo_a", "demo_b"}
        for row in table[table["train_cell"] == table["test_cell"]].itertuples():
            metrics = json.loads((finished / "results" / row.train_cell / model / "metrics.json").read_text())
            assert row.auroc == pytest.approx(metrics["auroc"], abs=1e-9) and row.n_test == metrics["n_test"]


def test_windows_follow_the_design_rule(finished):
    windows = pd.read_csv(finished / "results" / "demo_a" / "windows.tsv", sep="\t")
    pairs = pd.read_csv(finished / "resources" / "demo" / "demo_a.pairs.csv").iloc[windows["pair_id"]]
    centre = (pairs["enhancer_start"].to_numpy() + pairs["enhancer_end"].to_numpy()) // 2
    assert ((windows["enhancer_start"] == centre - 32) & (windows["enhancer_end"] == centre + 32)).all()
    assert set(windows.loc[windows.split == "test", "enhancer_chrom"]) == {"chr3"}


def test_rerun_has_nothing_to_do_and_report_shows_every_figure_with_a_caption(finished):
    dry = snakemake(finished, "-n")
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
    report = snakemake(finished, "--report", "results/report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    entries = report_results((finished / "results" / "report.html").read_text(errors="replace"))
    figures = sorted(str(path.relative_to(finished)) for path in (finished / "results" / "plots").rglob("*.png"))
    tables = [
        "results/summary.html",
        "results/paired_comparison.html",
        "results/distance_bins.html",
        "results/selection.html",
        "results/transfer/linear.html",
        "results/transfer/softmax.html",
        "results/demo_a/split_audit.html",
        "results/demo_b/split_audit.html",
    ]
    assert len(figures) == 14 and set(figures + tables) <= set(entries)
    for path in figures + tables:
        entry = entries[path]
        caption = re.sub("<[^>]+>", "", entry["caption"])
        assert len(caption.split()) > 25, (path, caption)  # says what it shows and how to read it
        assert "{{" not in caption and "snakemake." not in caption  # templates filled in
        assert entry["data_uri"].startswith("data:image/png" if path.endswith(".png") else "data:text/html")
    assert "demo_a" in entries["results/plots/demo_a/calibration.png"]["caption"]
    assert all(entry["labels"] for entry in entries.values())  # listed by labels, not by file paths
    # The tables are readable pages holding the TSVs' values; the TSVs stay files, not report items.
    assert not {"results/summary.tsv", "results/paired_comparison.tsv", "results/transfer/linear.tsv"} & set(entries)
    summary = pd.read_csv(finished / "results" / "summary.tsv", sep="\t", dtype=str)
    page = report_file(entries["results/summary.html"])
    row = summary[(summary["cell_line"] == "demo_b") & (summary["model"] == "kmer")].iloc[0]
    # The readable columns, each metric with its interval to 3 decimals; every column stays in summary.tsv.
    cells = "<td>demo_b</td><td>kmer</td><td>baseline</td><td>elements</td><td></td>"  # between: empty
    auroc = "{:.3f} [{:.3f}, {:.3f}]".format(*(float(row[c]) for c in ("auroc", "auroc_lo", "auroc_hi")))
    assert f"{cells}<td>{auroc}</td>" in page
    assert f"{len(summary.columns)} columns in results/summary.tsv" in page and "auprc_diff_kmer_lo" not in page
    description = report_description((finished / "results" / "report.html").read_text(errors="replace"))
    assert "Split by chromosome" in description  # what this run did, with the config's values:
    assert re.search(r"enhancer lies on\s+chr3 are the test split", description)
    assert "linear: linear attention" in description and "propensity:" in description
    assert "{{" not in description and "{%" not in description
    # The landing page reads clean: docutils' warnings ("System Message: WARNING/2") are shown in the page.
    assert "System Message" not in description and "Enumerated list ends" not in report.stderr


def test_the_report_renders_in_a_headless_browser_with_no_error_text(finished, tmp_path):
    """What a reader sees: the page's JavaScript renders the landing page; no docutils message, traceback or
    error text in it; a screenshot that is not blank. CI installs Chromium (.ci/run)."""
    if browser() is None:
        pytest.skip("needs Chromium to load the report headless: sudo apt-get install -y chromium")
    report = tmp_path / "report.html"
    run = snakemake(finished, "--report", str(report))
    assert run.returncode == 0, run.stderr[-3000:]
    text = visible_text(open_in_browser(report, "--dump-dom"))
    assert "Split by chromosome" in text and "Each model for" in text  # the landing page, rendered
    for error in ("System Message", "Traceback", "Error", "WARNING/", "{{", "{%"):
        assert error not in text, error
    open_in_browser(report, f"--screenshot={tmp_path / 'report.png'}", "--window-size=1400,1000")
    pixels = plt.imread(tmp_path / "report.png")
    assert pixels.shape[:2] == (1000, 1400) and pixels[..., :3].std() > 0.05  # something drawn, not a blank page


def report_calls(text: str) -> list[str]:
    """The argument text of every `report(...)` call in a rule file."""
    calls = []
    for match in re.finditer(r"\breport\(", text):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        calls.append(text[match.end() : end - 1])
    return calls


def test_every_report_item_has_labels():
    # The report lists a category by its items' labels, and by raw file paths as soon as one lacks them.
    calls = {path.name: report_calls(path.read_text()) for path in (REPO / "workflow" / "rules").glob("*.smk")}
    # Every figure rule and every report table: 6 figure rules, scaling, and 4 HTML tables; a
    # parser that stopped finding the calls would pass the loop below having checked nothing.
    assert sum(map(len, calls.values())) >= 11
    for name, arguments in calls.items():
        for argument in arguments:
            assert "labels=" in argument and "caption=" in argument, (name, argument)


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


def test_span_only_settings_rerun_nothing_in_a_run_without_span_models(finished):
    path = finished / "config" / "config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    config["windows"]["max_span"] = 1234
    config["train"]["max_tokens_per_batch"] = 999
    path.write_text(yaml.safe_dump(config))
    try:
        dry = snakemake(finished, "-n")
    finally:
        path.write_text(original)  # the finished run is shared with other test modules
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr


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
        ("cell_line\tpairs\tgenome\nbad name\tp.csv\tdemo\n", "cell line 'bad name' cannot name a results folder"),
        ("cell_line\tpairs\tgenome\ncells/a\tp.csv\tdemo\n", "cell line 'cells/a' cannot name a results folder"),
        ("cell_line\tpairs\tgenome\npooled\tp.csv\tdemo\n", "'pooled' is reserved (results/pooled/"),
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


def test_a_model_name_that_cannot_be_a_folder_or_is_a_baselines_is_rejected_naming_it(workdir, tmp_path):
    for name, message in (
        ("my model", "model 'my model' cannot name a results folder"),
        ("kmer", "the model name 'kmer' is reserved"),
    ):
        config = tiny_config()
        config["models"][name] = config["models"]["linear"]
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        run = snakemake(workdir, "-n", "--configfile", str(tmp_path / "config.yaml"))
        assert run.returncode != 0 and message in run.stdout + run.stderr, run.stderr[-2000:]
        assert "Job stats" not in run.stdout


def test_a_new_cell_line_schedules_only_its_own_jobs_and_the_aggregates(finished, tmp_path):
    sheet = (finished / "config" / "samples.tsv").read_text()
    new_row = "demo_c\tresources/demo/demo_a.pairs.csv\tdemo\t\n"  # a third cell line: one new row
    (tmp_path / "samples.tsv").write_text(sheet.rstrip("\n") + "\n" + new_row)
    config = tiny_config()
    config["samples"] = str(tmp_path / "samples.tsv")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    dry = snakemake(finished, "-n", "--configfile", str(tmp_path / "config.yaml"))
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = re.findall(r"rule (\w+):\n(?:    .*\n)*?    wildcards: ([^\n]*)", dry.stdout)
    per_cell = {(rule, wildcards) for rule, wildcards in jobs if "cell=" in wildcards}
    assert per_cell and all("cell=demo_c" in wildcards for _, wildcards in per_cell)
    assert {rule for rule, _ in per_cell} >= {
        "windows",
        "encode",
        "train",
        "evaluate",
        "baseline",
        "plot_test_set",
        "plot_training",
        "split_audit_html",
        "tracks",
    }
    aggregates = {rule for rule, wildcards in jobs if "cell=" not in wildcards}
    assert aggregates == {"transfer", "plot_transfer", "transfer_html"}  # per model; summary, comparison: none
    assert re.search(r"rule summary:", dry.stdout) and re.search(r"rule plot_comparison:", dry.stdout)
    assert re.search(r"rule selection:", dry.stdout)  # the choice on validation, made again with the new cell line
    assert not re.search(r"cell=demo_[ab]\b", dry.stdout)


def test_the_run_chooses_its_m7_from_each_models_validation_predictions(finished):
    from epiformer.evaluation.selection import read_selection

    results = finished / "results"
    selection = read_selection(results / "selection.tsv")
    assert sorted(zip(selection["cell_line"], selection["model"])) == sorted(
        (cell, model) for cell in ("demo_a", "demo_b") for model in MODELS
    )
    assert set(selection.loc[selection["chosen"], "model"]) == {"linear"}  # the only M7 of the tiny config
    assert selection.set_index("model")["candidate"].to_dict() == {"linear": True, "softmax": False}
    for row in selection.itertuples():
        folder = results / row.cell_line / row.model
        validation = pd.read_csv(folder / "validation_predictions.tsv", sep="\t")
        windows = pd.read_csv(results / row.cell_line / "windows.tsv", sep="\t")
        assert sorted(validation["pair_id"]) == sorted(windows.query("split == 'val'")["pair_id"])
        assert row.val_auroc == pytest.approx(roc_auc_score(validation["label"], validation["score"]), abs=1e-6)
        # Training's kept validation scores stand for the model's own: the same file's scores.
        kept = pd.read_csv(folder / "val_predictions.tsv", sep="\t").sort_values("pair_id")
        np.testing.assert_array_equal(kept["score"].to_numpy(), validation["score"].to_numpy())
    summary = pd.read_csv(results / "summary.tsv", sep="\t")
    assert summary.set_index(["cell_line", "model"])["chosen_on_validation"].to_dict() == {
        (cell, model): model == "linear" for cell, model in zip(summary["cell_line"], summary["model"])
    }
    text = (results / "summary.md").read_text()
    assert "## Chosen on validation" in text and "puts **linear** forward" in text


def test_the_choice_reads_no_test_file(finished, tmp_path):
    """Every test split's predictions and metrics deleted, the selection job alone runs and chooses the same."""
    run = tmp_path / "run"
    shutil.copytree(finished, run, symlinks=True)
    chosen = (run / "results" / "selection.tsv").read_text()
    (run / "results" / "selection.tsv").unlink()
    removed = [path for name in ("predictions.tsv", "metrics.json") for path in (run / "results").glob(f"*/*/{name}")]
    assert len(removed) == 2 * 2 * (len(MODELS) + len(BASELINES))
    for path in removed:
        path.unlink()
    done = snakemake(run, "results/selection.tsv")
    assert done.returncode == 0, done.stderr[-3000:]
    ran = set(re.findall(r"rule (\w+):", done.stdout + done.stderr))
    assert ran == {"selection"}, ran
    assert (run / "results" / "selection.tsv").read_text() == chosen


def test_a_model_may_carry_its_own_recipe(finished, tmp_path):
    """`learning_rate` and `weight_decay` in a model's entry are its own train.learning_rate and weight_decay."""
    config = tiny_config()
    config["models"]["linear_slow"] = {**config["models"]["linear"], "learning_rate": 0.0005, "weight_decay": 0.2}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = tmp_path / "run"  # a copy: the shared run's outputs stay the config's own
    shutil.copytree(finished, run, symlinks=True)
    target = "results/demo_a/linear_slow/model.json"
    done = snakemake(run, target, "--configfile", str(tmp_path / "config.yaml"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rule train:" in done.stdout + done.stderr and "rule windows:" not in done.stdout + done.stderr
    own = json.loads((run / target).read_text())["train"]
    shared = json.loads((run / "results/demo_a/linear/model.json").read_text())["train"]
    assert (own["learning_rate"], own["weight_decay"]) == (0.0005, 0.2)
    assert (shared["learning_rate"], shared["weight_decay"]) == (config["train"]["learning_rate"], 0.01)
    assert {k: v for k, v in own.items() if k not in ("learning_rate", "weight_decay")} == {
        k: v for k, v in shared.items() if k not in ("learning_rate", "weight_decay")
    }


def test_results_record_the_config_versions_and_genome_index_checksum(finished):
    from epiformer.io.files import sha256_file

    for cell in ("demo_a", "demo_b"):
        report = json.loads((finished / "results" / cell / "windows_stats.json").read_text())
        assert report["inputs"]["genome_index_sha256"] == sha256_file(finished / "resources/demo/genome.fa.fai")
        assert report["inputs"]["pairs_sha256"] and report["split"]["test_chromosomes"] == ["chr3"]
        assert report["windows"]["enhancer_width"] == 64 and report["versions"]["torch"]
        description = json.loads((finished / "results" / cell / "linear" / "model.json").read_text())
        assert description["train"]["epochs"] == 1 and description["model"]["d_model"] == 16
        assert description["versions"]["epiformer"] and description["data_manifest_sha256"]
        assert description["cpu_capability"] in {"DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "SVE"}


PAIRED_METRICS = {"auroc": roc_auc_score, "auprc": average_precision_score}


def test_summary_rule_writes_the_paired_comparison(finished):
    results = finished / "results"
    config = yaml.safe_load((finished / "config" / "config.yaml").read_text())["evaluate"]
    summary = pd.read_csv(results / "summary.tsv", sep="\t")
    paired = pd.read_csv(results / "paired_comparison.tsv", sep="\t").set_index(
        ["cell_line", "model", "baseline", "metric"]
    )
    assert len(paired) == 2 * len(MODELS) * len(BASELINES) * len(PAIRED_METRICS)
    assert (paired["resamples"] == config["bootstrap"]).all() and (paired["seed"] == config["seed"]).all()
    columns = [f"{m}_diff_{b}{s}" for b in BASELINES for m in PAIRED_METRICS for s in ("", "_lo", "_hi")]
    assert set(columns) <= set(summary.columns)
    assert summary.loc[summary["kind"] == "baseline", columns].isna().all().all()
    assert (paired["bootstrap_unit"] == "promoter").all()  # the default
    markdown = (results / "summary.md").read_text()
    for row in summary[summary["kind"] == "transformer"].itertuples():
        model = pd.read_csv(results / row.cell_line / row.model / "predictions.tsv", sep="\t").set_index("pair_id")
        model = model.sort_index()
        windows = pd.read_csv(results / row.cell_line / "windows.tsv", sep="\t").set_index("pair_id")
        promoters = windows.loc[model.index, ["promoter_chrom", "promoter_start", "promoter_end"]].astype(str)
        promoters = promoters.agg(":".join, axis=1).tolist()
        assert row.bootstrap_unit == "promoter" and row.bootstrap_groups == len(set(promoters)) < len(model)
        for baseline in BASELINES:
            other = pd.read_csv(results / row.cell_line / baseline / "predictions.tsv", sep="\t").set_index("pair_id")
            other = other.loc[model.index]
            labels, scores_a, scores_b = model["label"].to_numpy(), model["score"].to_numpy(), other["score"].to_numpy()
            for name, metric in PAIRED_METRICS.items():
                entry = paired.loc[(row.cell_line, row.model, baseline, name)]
                difference = metric(labels, scores_a) - metric(labels, scores_b)
                (low, high), kept = independent_paired_interval(
                    labels, scores_a, scores_b, metric, config["bootstrap"], config["seed"], promoters
                )
                for value, want in ((entry["difference"], difference), (entry["lo"], low), (entry["hi"], high)):
                    assert value == pytest.approx(want, abs=1e-4)
                assert entry["resamples_used"] == kept
                assert getattr(row, f"{name}_diff_{baseline}") == pytest.approx(difference, abs=1e-4)
                assert getattr(row, f"{name}_diff_{baseline}_lo") == pytest.approx(low, abs=1e-4)
            assert f"| {row.cell_line} | {row.model} vs {baseline} |" in markdown


def test_report_shows_the_paired_table_with_its_caption(finished, tmp_path):
    run = snakemake(finished, "--report", str(tmp_path / "report.html"))
    assert run.returncode == 0, run.stderr[-3000:]
    entries = report_results((tmp_path / "report.html").read_text(errors="replace"))
    entry = entries["results/paired_comparison.html"]
    caption = re.sub("<[^>]+>", "", entry["caption"])
    assert "paired" in caption and "excludes_zero" in caption and len(caption.split()) > 25
    assert entry["data_uri"].startswith("data:text/html") and "<th>excludes_zero</th>" in report_file(entry)


def readme_output_tree() -> list[tuple[str, str]]:
    """(path pattern, description) of each entry of the README's "What you get" tree, continuation lines joined."""
    text = (REPO / "README.md").read_text()
    block = text.split("## What you get", 1)[1].split("```", 2)[1]
    entries = []
    for line in block.splitlines()[2:]:  # after "results/"
        if not line.strip():
            continue
        if line.startswith(" " * 10):  # a description's continuation
            entries[-1] = (entries[-1][0], entries[-1][1] + " " + line.strip())
            continue
        path, _, description = line.strip().partition("  ")
        entries.append((path.strip(), description.strip()))
    return entries


def output_patterns(spec: str, names: dict[str, list[str]]) -> list[re.Pattern]:
    """Regexes of the results/ paths one tree entry names: `{cell}/a.tsv, b.json` shares `{cell}/`, a name ending
    in / is a folder (anything under it), `*` any name, `{cell}`, `{model}`, `{baseline}` one of the run's
    (`names`), another `{...}` any one path part."""
    patterns, folder = [], ""
    for index, name in enumerate(part.strip() for part in spec.split(",")):
        if index == 0:
            folder = name.rstrip("/").rpartition("/")[0]
            folder, name = (folder + "/", name[len(folder) + 1 :]) if folder else ("", name)
        full = folder + name
        regex = re.escape(full).replace(r"\*", "[^/]+")
        for placeholder, values in names.items():
            regex = regex.replace(re.escape("{" + placeholder + "}"), "(" + "|".join(map(re.escape, values)) + ")")
        regex = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", regex)
        patterns.append(re.compile(regex + (".+" if full.endswith("/") else "")))
    return patterns


def test_the_readmes_output_tree_names_every_file_the_run_writes(finished):
    """Every file a default run writes under results/ is named by an entry of the README's tree, and each entry
    that a default run makes (NOT_IN_A_DEFAULT_RUN: not span models, replicates, explain, a VCF, pooled models
    or the report) exists; `{cell}`, `{model}` and `{baseline}` stand for the run's own names."""
    entries = readme_output_tree()
    config = yaml.safe_load((finished / "config" / "config.yaml").read_text())
    cells = pd.read_csv(finished / config["samples"], sep="\t")["cell_line"].tolist()
    baselines = config["baselines"]["names"]
    # a model's folder in the tree: the models', and the baselines' where both have the file (tracks)
    names = {"cell": cells, "model": [*config["models"], *baselines], "baseline": baselines}
    patterns = {spec: output_patterns(spec, names) for spec, _ in entries}
    results = finished / "results"
    written = [
        path.relative_to(results).as_posix()
        for path in results.rglob("*")
        if path.is_file() and path.name != ".snakemake_timestamp"
    ]
    unnamed = [path for path in written if not any(p.fullmatch(path) for ps in patterns.values() for p in ps)]
    assert not unnamed, f"README.md's output tree names none of: {unnamed}"
    for spec, _ in entries:
        for name, pattern in zip(spec.split(","), patterns[spec]):
            if any(part in name for part in NOT_IN_A_DEFAULT_RUN):
                continue
            assert any(pattern.fullmatch(path) for path in written), f"README.md names {name!r} ({spec}): none written"


# What the README's tree names that a default run does not make: span models' files, replicates, `snakemake
# explain`, a VCF's variants, pooled models, and the report (`snakemake --report` after the run).
NOT_IN_A_DEFAULT_RUN = (
    "span_shards/",
    "genomes/",
    "replicates/",
    "motifs",
    "attributions",
    "variants",
    "pooled/",
    "report.html",
)
