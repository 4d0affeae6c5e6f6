"""epiformer.evaluation.plots: real figures from small real inputs, read back from the files they write.

The SVGs are written with `svg.fonttype: none`, so their text (titles, legends, labels) stays
text that the tests can read and compare with values computed here from the inputs.
"""

import xml.etree.ElementTree as ET

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.evaluation.distance import binned_metrics
from epiformer.evaluation.plots import (
    line_style,
    palette,
    plot_calibration,
    plot_comparison,
    plot_cost,
    plot_distance_bins,
    plot_roc_pr,
    plot_scaling,
    plot_training,
    plot_transfer,
    reliability,
)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def svg_text_as_text():
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        yield


def figure_texts(png, width: int, height: int) -> list[str]:
    """Check `png` and the SVG beside it are whole figures (and nothing else is in the folder); the SVG's texts."""
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.imread(png).shape[:2] == (height, width)  # figsize x 120 dpi: the whole figure was drawn
    root = ET.parse(png.with_suffix(".svg")).getroot()
    assert root.tag == f"{SVG}svg"
    assert sorted(p.name for p in png.parent.iterdir()) == sorted([png.name, png.with_suffix(".svg").name])
    return ["".join(text.itertext()) for text in root.iter(f"{SVG}text")]


def scored_predictions(folder, name, n, seed, signal):
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(int)
    frame = pd.DataFrame(
        {"pair_id": np.arange(n), "label": labels, "score": np.clip(rng.normal(0.4 + signal * labels, 0.2), 0, 1)}
    )
    path = folder / f"{name}.tsv"
    frame.to_csv(path, sep="\t", index=False)
    return path, frame


@pytest.mark.parametrize(
    "split_mode, caption", [("chromosome", "held-out chromosomes"), ("random", "random split - LEAK-PRONE")]
)
def test_roc_pr_legends_give_scikit_learns_auroc_and_auprc_of_each_input(tmp_path, split_mode, caption):
    inputs = {}
    for name, seed, signal in (("linear", 0, 0.3), ("kmer", 1, 0.1)):
        inputs[name] = scored_predictions(tmp_path, name, 200, seed, signal)
    png = tmp_path / "plots" / "roc_pr.png"
    plot_roc_pr("cell_x", {name: path for name, (path, _) in inputs.items()}, png, split_mode)
    texts = figure_texts(png, 1200, 540)
    for name, (_, frame) in inputs.items():
        assert f"{name} (AUROC {roc_auc_score(frame['label'], frame['score']):.3f})" in texts
        assert f"{name} (AUPRC {average_precision_score(frame['label'], frame['score']):.3f})" in texts
    assert f"prevalence {inputs['kmer'][1]['label'].mean():.2f}" in texts and "chance" in texts
    assert f"cell_x: ROC, test ({caption})" in texts and f"cell_x: PR, test ({caption})" in texts


def test_training_curves_are_titled_with_the_model_cell_line_and_split(tmp_path):
    log = tmp_path / "train_log.tsv"
    pd.DataFrame(
        {
            "epoch": [1, 2, 3],
            "train_loss": [0.69, 0.6, 0.55],
            "val_loss": [0.7, 0.65, 0.66],
            "val_auroc": [0.55, 0.7, 0.72],
            "val_auprc": [0.35, 0.5, 0.52],
        }
    ).to_csv(log, sep="\t", index=False)
    png = tmp_path / "plots" / "linear.training.png"
    plot_training("cell_x", "linear", log, png, "random")
    texts = figure_texts(png, 1200, 480)
    assert "linear trained on cell_x" in texts and "validation (random split - LEAK-PRONE)" in texts
    assert {"train (class-weighted)", "validation", "validation AUROC", "validation AUPRC", "epoch"} <= set(texts)


def test_reliability_bins_scores_in_tenths_and_leaves_out_empty_bins():
    rng = np.random.default_rng(2)
    scores = np.r_[0.0, 1.0, rng.random(300) ** 2]  # skewed low: high bins hold few pairs
    labels = (rng.random(len(scores)) < scores).astype(int)
    table = reliability(labels, scores)
    bins = np.minimum((scores * 10).astype(int), 9)  # 1.0 falls in the last bin, with the scores just below it
    assert table["bin"].tolist() == sorted(set(bins))
    for row in table.itertuples():
        assert row.pairs == (bins == row.bin).sum()
        assert row.mean_score == pytest.approx(scores[bins == row.bin].mean())
        assert row.positive_rate == pytest.approx(labels[bins == row.bin].mean())
    sparse = reliability(np.array([1, 0, 1]), np.array([0.05, 0.07, 0.95]))
    assert sparse["bin"].tolist() == [0, 9] and sparse["pairs"].tolist() == [2, 1]


def test_calibration_figure_draws_every_model_on_the_test_split(tmp_path):
    inputs = {
        name: scored_predictions(tmp_path, name, 150, seed, 0.3)[0] for name, seed in (("linear", 0), ("softmax", 3))
    }
    png = tmp_path / "plots" / "calibration.png"
    plot_calibration("cell_x", inputs, png)
    texts = figure_texts(png, 780, 840)
    assert {"linear", "softmax", "perfectly calibrated"} <= set(texts)
    assert "cell_x: calibration, test (held-out chromosomes)" in texts


def summary_rows(cell, oracle):
    return [
        {"cell_line": cell, "model": "linear", "kind": "transformer", "auroc": 0.9, "auroc_lo": 0.85, "auroc_hi": 0.94}
        | {"auprc": 0.7, "auprc_lo": 0.6, "auprc_hi": 0.8, "positives": 30, "n_test": 120, "oracle_auroc": oracle},
        {"cell_line": cell, "model": "distance", "kind": "baseline", "auroc": 0.5, "auroc_lo": 0.45, "auroc_hi": 0.55}
        | {"auprc": 0.25, "auprc_lo": 0.2, "auprc_hi": 0.3, "positives": 30, "n_test": 120, "oracle_auroc": oracle},
    ]


def test_comparison_draws_the_oracle_inside_its_panel_not_on_the_frame(tmp_path, monkeypatch):
    import epiformer.evaluation.plots as plots

    drawn = {}
    monkeypatch.setattr(plots, "save_figure", lambda fig, png: drawn.setdefault(png.name, fig))
    summary = tmp_path / "summary.tsv"
    pd.DataFrame(summary_rows("cell_x", 0.97)).to_csv(summary, sep="\t", index=False)  # intervals end at 0.94
    plot_comparison(summary, tmp_path / "comparison.png")
    auroc = drawn["comparison.png"].axes[0]
    low, high = auroc.get_xlim()
    assert low < 0.45 and high >= 0.97 + 0.01  # every interval, and the oracle clear of the right edge


def test_comparison_has_a_row_of_panels_per_cell_line_naming_each_model(tmp_path):
    summary = tmp_path / "summary.tsv"
    pd.DataFrame(summary_rows("cell_x", 0.97) + summary_rows("cell_y", None)).to_csv(summary, sep="\t", index=False)
    png = tmp_path / "plots" / "comparison.png"
    plot_comparison(summary, png)
    height = round((1.2 + 0.45 * 2 * 2) * 120)  # two models in each of two cell lines
    texts = figure_texts(png, 1200, height)
    for cell in ("cell_x", "cell_y"):
        assert f"{cell}: AUROC" in texts and f"{cell}: AUPRC" in texts
    assert texts.count("linear") == texts.count("distance") == 4  # a tick label in each of the four panels
    assert texts.count("oracle (true probabilities)") == 1  # only cell_x has a truth table
    assert texts.count("prevalence (chance)") == 2


def test_transfer_heatmaps_print_the_tables_values(tmp_path):
    table = pd.DataFrame(
        {
            "train_cell": ["a", "a", "b", "b"],
            "test_cell": ["a", "b", "a", "b"],
            "auroc": [0.91, 0.62, 0.48, 0.88],
            "auprc": [0.81, 0.44, 0.3, 0.77],
            "n_test": 100,
            "positives": 25,
        }
    )
    table.to_csv(tmp_path / "linear.tsv", sep="\t", index=False)
    png = tmp_path / "plots" / "linear.png"
    plot_transfer(tmp_path / "linear.tsv", "linear", png)
    texts = figure_texts(png, round((2 * (2.5 + 1.4) + 1.5) * 120), round((2.5 + 1.4 + 0.6) * 120))
    for metric in ("auroc", "auprc"):
        title = texts.index(f"linear: {metric.upper()}")
        cells = [text for text in texts[:title] if text.startswith("0.")][-4:]  # the annotations, row by row
        assert cells == [f"{value:.2f}" for value in table[metric]]


def test_scaling_figure_names_each_component_and_attention_and_the_device(tmp_path):
    tokens = np.array([1000, 2000, 4000])
    rows = [
        {
            "component": component,
            "attention": attention,
            "tokens": t,
            "seconds": t * f,
            "peak_mb": t * f,
            "device": "cpu",
        }
        for component in ("attention", "model")
        for attention, f in (("linear", 1e-4), ("softmax", 1e-7 * tokens.max()))
        for t in tokens
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "scaling.tsv", sep="\t", index=False)
    png = tmp_path / "plots" / "scaling.png"
    plot_scaling(tmp_path / "scaling.tsv", png)
    texts = figure_texts(png, 1320, 540)
    assert "M7 linear vs softmax attention, batch 1, cpu" in texts
    for label in ("attention, linear", "attention, softmax", "model, linear", "model, softmax", "O(T) guide"):
        assert texts.count(label) >= 1, label
    # The shipped reference table's figure says so in its title, so no one reads it as this run's machine.
    reference = tmp_path / "reference" / "scaling_reference.png"
    plot_scaling(tmp_path / "scaling.tsv", reference, measured="a reference measurement, not this run's")
    assert "a reference measurement, not this run's" in figure_texts(reference, 1320, 540)  # the title's second line


def test_the_test_set_figures_are_the_same_in_rule_caption_and_package():
    """plot_test_set's {figure} names live in three files; a figure added to one must be in all."""
    import ast
    import re

    from epiformer.evaluation.plots import TEST_SET_FIGURES
    from tests.helpers import REPO

    rules = (REPO / "workflow" / "rules" / "plots.smk").read_text()
    labels = ast.literal_eval(re.search(r"^TEST_SET_FIGURE_LABELS = (\{.*?\})$", rules, re.M).group(1))
    caption = (REPO / "workflow" / "report" / "test_set.rst").read_text()
    assert set(labels) == set(TEST_SET_FIGURES)
    assert set(re.findall(r'snakemake\.wildcards\.figure == "(\w+)"', caption)) == set(TEST_SET_FIGURES)


def test_distance_bin_figure_draws_each_cell_lines_bins_with_their_counts_for_every_model(tmp_path):
    rng = np.random.default_rng(0)
    distances = (10 ** rng.uniform(4, 6, 500)).astype(np.int64)
    labels = (rng.random(500) < 0.3).astype(int)
    frames = []
    for cell, bins in (("cell_x", 4), ("cell_y", 3)):
        for model in ("linear", "distance"):
            table = binned_metrics(labels, rng.random(500), distances, bins)
            frames.append(table.assign(cell_line=cell, model=model))
    pd.concat(frames).to_csv(tmp_path / "bins.tsv", sep="\t", index=False)
    png = tmp_path / "plots" / "distance_bins.png"
    plot_distance_bins(tmp_path / "bins.tsv", png)
    texts = figure_texts(png, round(12.5 * 120), round(4.2 * 2 * 120))  # a row of two panels per cell line
    for cell, bins in (("cell_x", 4), ("cell_y", 3)):
        assert f"{cell}: AUROC by distance, test" in texts and f"{cell}: AUPRC by distance, test" in texts
        for row in binned_metrics(labels, labels, distances, bins).itertuples():  # each bin, its pairs and positives
            assert sum(f"{row.n_test} pairs, {row.positives} +" in text for text in texts) >= 2
    assert texts.count("linear") == texts.count("distance") == 2  # a legend per cell line


def test_each_model_and_baseline_keeps_one_colour_across_the_runs_figures(tmp_path, monkeypatch):
    import matplotlib.colors as mcolors

    import epiformer.evaluation.plots as plots

    drawn = {}  # figure file name -> the figure, caught as it is saved (the drawing itself is the package's)
    monkeypatch.setattr(plots, "save_figure", lambda fig, png: drawn.setdefault(png.name, fig))
    names = ["linear", "softmax", "distance", "kmer"]  # the run's order: models, then baselines
    predictions = {name: scored_predictions(tmp_path, name, 200, i, 0.3)[0] for i, name in enumerate(names)}
    plot_roc_pr("cell_x", predictions, tmp_path / "roc_pr.png")
    plot_calibration("cell_x", predictions, tmp_path / "calibration.png")
    rng = np.random.default_rng(0)
    distances, labels = (10 ** rng.uniform(4, 6, 300)).astype(np.int64), (rng.random(300) < 0.3).astype(int)
    bins = [binned_metrics(labels, rng.random(300), distances, 3).assign(cell_line="cell_x", model=n) for n in names]
    pd.concat(bins).to_csv(tmp_path / "bins.tsv", sep="\t", index=False)
    plot_distance_bins(tmp_path / "bins.tsv", tmp_path / "distance_bins.png")
    rows = [
        {"cell_line": "cell_x", "model": name, "kind": "baseline" if name in ("distance", "kmer") else "transformer"}
        | {"auroc": 0.7, "auroc_lo": 0.6, "auroc_hi": 0.8, "auprc": 0.4, "auprc_lo": 0.3, "auprc_hi": 0.5}
        | {"positives": 30, "n_test": 120}
        for name in names
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "summary.tsv", sep="\t", index=False)
    plot_comparison(tmp_path / "summary.tsv", tmp_path / "comparison.png")

    def line_colours(fig) -> dict[str, str]:  # legend label's first word -> its line's colour
        lines = [line for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")]
        return {line.get_label().split(" ")[0]: mcolors.to_hex(line.get_color()) for line in lines}

    seen = {figure: line_colours(drawn[f"{figure}.png"]) for figure in ("roc_pr", "calibration", "distance_bins")}
    comparison = drawn["comparison.png"].axes[0]
    seen["comparison"] = {
        label.get_text(): mcolors.to_hex(container.lines[0].get_color())
        for label, container in zip(comparison.get_yticklabels(), comparison.containers)
    }
    for figure, colours in seen.items():
        assert {name: colours[name] for name in names} == {name: seen["roc_pr"][name] for name in names}, figure
    assert len(set(seen["roc_pr"][name] for name in names)) == 4  # M7 and softmax apart, each baseline its own
    assert seen["roc_pr"]["distance"] == "#000000"  # the within-distance reference, black everywhere


def test_the_cost_figure_names_each_model_in_a_legend_and_labels_several_ticks_within_one_decade(tmp_path):
    # The default demo's trainings all take 2-6 minutes: one decade, where decade ticks alone gave a single label.
    rows = [
        {"cell_line": "demo_a", "model": name, "kind": "transformer", "input": "elements", "train_seconds": seconds}
        | {"auroc": 0.9, "auroc_lo": 0.88, "auroc_hi": 0.93, "epochs_trained": 20, "oracle_auroc": 0.96}
        for name, seconds in (("linear", 180.0), ("softmax", 228.0))
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "summary.tsv", sep="\t", index=False)
    png = tmp_path / "plots" / "cost.png"
    plot_cost(tmp_path / "summary.tsv", png)
    texts = figure_texts(png, 900, 624)
    assert "linear (20 epochs)" in texts and "softmax (20 epochs)" in texts  # each once, in the legend
    assert texts.count("linear (20 epochs)") == 1 and "oracle (true probabilities)" in texts
    ticks = [text for text in texts if text.replace(".", "").isdigit()]
    assert len([tick for tick in ticks if 1 <= float(tick) <= 10]) >= 2, texts


def test_the_transfer_panels_titles_and_colour_bars_lie_inside_the_figure(tmp_path, monkeypatch):
    import epiformer.evaluation.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, png: drawn.append(fig))
    table = pd.DataFrame({"train_cell": ["a", "a", "b", "b"], "test_cell": ["a", "b", "a", "b"]})
    table = table.assign(auroc=[0.91, 0.62, 0.48, 0.88], auprc=[0.81, 0.44, 0.3, 0.77], n_test=100, positives=25)
    table.to_csv(tmp_path / "transfer.tsv", sep="\t", index=False)
    plot_transfer(tmp_path / "transfer.tsv", "linear", tmp_path / "linear.png")
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    for ax in fig.axes:  # two heatmaps and their two colour bars
        extent = ax.get_tightbbox(renderer)  # the axes with its title, tick labels and axis labels
        assert extent.y1 <= box.y1 + 1 and extent.x1 <= box.x1 + 1 and extent.x0 >= -1 and extent.y0 >= -1, ax


def test_a_pooled_baseline_is_drawn_in_its_baselines_colour_and_apart_from_it_by_line():
    names = ["linear", "kmer_pooled", "softmax", "kmer", "distance_pooled", "linear_pooled"]
    colours = palette(names)
    assert colours["kmer_pooled"] == colours["kmer"] and colours["distance_pooled"] == "black"
    models = [colours[name] for name in ("linear", "softmax", "linear_pooled")]  # a model named *_pooled is a model
    assert len(set(models)) == 3 and not set(models) & {colours["kmer"], "black"}
    assert [line_style(name) for name in ("linear_pooled", "kmer", "kmer_pooled")] == ["-", "--", "-."]
