"""Figures: test curves, calibration, training curves, model comparison, transfer, scaling.

Each function takes paths to workflow outputs and writes one figure as PNG and, beside it,
SVG (same name, `.svg`) for papers; matplotlib runs on the non-interactive Agg backend so
the workflow needs no display. Models are drawn in solid lines, baselines dashed, and each model or
baseline in the same colour in every figure of a run (`palette`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve  # noqa: E402

from epiformer.constants import ELEMENTS_INPUT, POOLED_SUFFIX, SPAN_INPUT, baseline_of  # noqa: E402
from epiformer.evaluation.distance import REFERENCE  # noqa: E402
from epiformer.evaluation.summary import read_summary  # noqa: E402
from epiformer.io.files import atomic_write  # noqa: E402


def line_style(name: str) -> str:
    """Models solid, baselines dashed, a pooled baseline dash-dotted (in its baseline's colour: `palette`)."""
    if baseline_of(name) is None:
        return "-"
    return "-." if is_pooled_baseline(name) else "--"


def is_pooled_baseline(name: str) -> bool:
    return baseline_of(name) is not None and name.endswith(POOLED_SUFFIX)


# Each baseline's own colour in every figure; distance, the reference within distance bins, in black.
BASELINE_COLOURS = {"distance": "black", "kmer": "tab:brown", "distance_kmer": "tab:olive", "propensity": "tab:pink"}
# Models take these in the run's order (models first, as summary.tsv lists them). Grey and green are left
# out: grey draws chance, green the oracle and the element ceiling.
MODEL_COLOURS = (
    "tab:blue",
    "tab:orange",
    "tab:red",
    "tab:purple",
    "tab:cyan",
    "#08306b",  # navy
    "#fdae6b",  # light orange
    "#9e9ac8",  # light purple
    "#fb6a4a",  # light red
    "#6baed6",  # light blue
)


def palette(names) -> dict[str, str]:
    """Each name's colour: a baseline its own (BASELINE_COLOURS; pooled or not), models MODEL_COLOURS in the order
    given.

    Every figure of a run passes its names in the run's order (the summary's: models, then
    baselines), so a model keeps its colour from the ROC curves to the distance bins and the cost
    figure, and no two models of a run share one (up to ten; then the colours repeat).
    """
    names = list(dict.fromkeys(names))
    models = [name for name in names if baseline_of(name) is None]
    colours = {name: MODEL_COLOURS[index % len(MODEL_COLOURS)] for index, name in enumerate(models)}
    return {name: BASELINE_COLOURS[baseline_of(name)] if name not in colours else colours[name] for name in names}


def save_figure(fig, out_png: str | Path) -> None:
    """PNG (for the report) and SVG beside it, each written atomically."""
    out_png = Path(out_png)
    for path, options in ((out_png, {"dpi": 120}), (out_png.with_suffix(".svg"), {})):
        atomic_write(path, lambda temporary, o=options, p=path: fig.savefig(temporary, format=p.suffix[1:], **o))
    plt.close(fig)


def split_caption(split_mode: str) -> str:
    """What every figure says about its split; a random split is flagged as leak-prone."""
    return "held-out chromosomes" if split_mode == "chromosome" else f"{split_mode} split - LEAK-PRONE"


def plot_roc_pr(
    cell_line: str, predictions: dict[str, str | Path], out_png: str | Path, split_mode: str = "chromosome"
) -> None:
    """ROC (left) and precision-recall (right, with the prevalence line) for every model of a cell line."""
    fig, (roc_ax, pr_ax) = plt.subplots(1, 2, figsize=(10, 4.5))
    prevalence, colours = None, palette(predictions)
    for model, path in predictions.items():
        frame = pd.read_csv(path, sep="\t")
        labels, scores = frame["label"], frame["score"]
        fpr, tpr, _ = roc_curve(labels, scores)
        precision, recall, _ = precision_recall_curve(labels, scores)
        style = line_style(model)
        roc_ax.plot(fpr, tpr, style, color=colours[model], label=f"{model} (AUROC {roc_auc_score(labels, scores):.3f})")
        # Steps, as average precision integrates them; tied scores (a constant baseline) then
        # read as a flat line at the prevalence instead of a misleading diagonal.
        pr_ax.plot(
            recall,
            precision,
            style,
            color=colours[model],
            drawstyle="steps-post",
            label=f"{model} (AUPRC {average_precision_score(labels, scores):.3f})",
        )
        prevalence = labels.mean()
    roc_ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="chance")
    if prevalence is not None:
        pr_ax.axhline(prevalence, color="grey", linestyle=":", label=f"prevalence {prevalence:.2f}")
    roc_ax.set(
        xlabel="False positive rate",
        ylabel="True positive rate",
        title=f"{cell_line}: ROC, test ({split_caption(split_mode)})",
    )
    pr_ax.set(
        xlabel="Recall",
        ylabel="Precision",
        ylim=(0, 1.02),
        title=f"{cell_line}: PR, test ({split_caption(split_mode)})",
    )
    roc_ax.legend(loc="lower right", fontsize=8)
    pr_ax.legend(loc="lower center", ncol=2, fontsize=7)  # below the prevalence line, where curves rarely go
    for ax in (roc_ax, pr_ax):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out_png)


def plot_training(
    cell_line: str, model: str, train_log: str | Path | list, out_png: str | Path, split_mode: str = "chromosome"
) -> None:
    """Loss (left) and validation AUROC/AUPRC (right) per epoch; for replicates (a list of logs), a colour each."""
    logs = train_log if isinstance(train_log, list) else [train_log]
    fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for index, path in enumerate(logs):
        log = pd.read_csv(path, sep="\t")
        name = f"replicate {index + 1}: " if len(logs) > 1 else ""
        # One replicate: a colour per curve. Several: a colour per replicate, the first curve of each panel dotted.
        first, second = (
            ({"color": f"C{index}", "linestyle": ":"}, {"color": f"C{index}"}) if len(logs) > 1 else ({}, {})
        )
        loss_ax.plot(log["epoch"], log["train_loss"], marker="o", label=f"{name}train (class-weighted)", **first)
        loss_ax.plot(log["epoch"], log["val_loss"], marker="o", label=f"{name}validation", **second)
        metric_ax.plot(log["epoch"], log["val_auroc"], marker="o", label=f"{name}validation AUROC", **first)
        metric_ax.plot(log["epoch"], log["val_auprc"], marker="o", label=f"{name}validation AUPRC", **second)
    loss_ax.set(xlabel="epoch", ylabel="binary cross-entropy", title="loss")
    metric_ax.set(xlabel="epoch", ylabel="score", ylim=(0, 1), title=f"validation ({split_caption(split_mode)})")
    for ax in (loss_ax, metric_ax):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{model} trained on {cell_line}")
    fig.tight_layout()
    save_figure(fig, out_png)


def plot_scaling(table_path: str | Path, out_png: str | Path, measured: str = "") -> None:
    """Time (left) and peak memory (right) against tokens, log-log, with O(T) and O(T^2) guides.

    `measured` says where the numbers come from when not from this run (the title's second line)."""
    table = pd.read_csv(table_path, sep="\t")
    fig, (time_ax, memory_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    for (component, attention), part in table.groupby(["component", "attention"]):
        # the attention by colour and line (M7's solid blue, softmax's dashed orange), what was timed by marker
        style = {"linestyle": SCALING_LINES[attention], "color": SCALING_COLOURS[attention]}
        style |= {"marker": SCALING_MARKERS.get(component, "o"), "label": f"{component}, {attention}"}
        time_ax.plot(part["tokens"], part["seconds"], **style)
        memory_ax.plot(part["tokens"], part["peak_mb"].clip(lower=0.1), **style)
    anchor = table[(table.component == "attention") & (table.attention == "linear")].sort_values("tokens")
    if len(anchor):
        tokens = anchor["tokens"].to_numpy(float)
        start_t, start_s = tokens[0], anchor["seconds"].iloc[0]
        time_ax.plot(tokens, start_s * tokens / start_t, color="grey", linestyle=":", label="O(T) guide")
        time_ax.plot(tokens, start_s * (tokens / start_t) ** 2, color="black", linestyle=":", label="O(T²) guide")
    time_ax.set(
        xscale="log", yscale="log", xlabel="tokens T", ylabel="seconds (forward + backward)", title="Time per pass"
    )
    memory_ax.set(xscale="log", yscale="log", xlabel="tokens T", ylabel="peak extra memory (MB)", title="Peak memory")
    for ax in (time_ax, memory_ax):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    device = table["device"].iloc[0] if len(table) else "?"
    subtitle = "\n" + "\n".join(textwrap.wrap(measured, 100)) if measured else ""  # a long line runs off the figure
    fig.suptitle(f"M7 linear vs softmax attention, batch 1, {device}{subtitle}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out_png)


# plot_scaling's series: linear attention (M7) and softmax each in one colour and line, whatever was timed (the
# attention op, the whole model, its projections) by marker.
SCALING_COLOURS = {"linear": "tab:blue", "softmax": "tab:orange"}
SCALING_LINES = {"linear": "-", "softmax": "--"}
SCALING_MARKERS = {"attention": "o", "model": "s", "projections": "^"}


def reliability(labels: np.ndarray, scores: np.ndarray, bins: int = 10) -> pd.DataFrame:
    """Mean score and observed positive rate per equal-width score bin (empty bins left out)."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(scores, edges[1:-1]), 0, bins - 1)
    frame = pd.DataFrame({"bin": which, "score": scores, "label": labels})
    return (
        frame.groupby("bin")
        .agg(mean_score=("score", "mean"), positive_rate=("label", "mean"), pairs=("label", "size"))
        .reset_index()
    )


def plot_calibration(
    cell_line: str, predictions: dict[str, str | Path], out_png: str | Path, split_mode: str = "chromosome"
) -> None:
    """Reliability diagram (top) and score histograms (bottom) of every model on the test split."""
    fig, (curve_ax, hist_ax) = plt.subplots(2, 1, figsize=(6.5, 7), height_ratios=[3, 1.3], sharex=True)
    curve_ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfectly calibrated")
    colours = palette(predictions)
    for model, path in predictions.items():
        frame = pd.read_csv(path, sep="\t")
        table = reliability(frame["label"].to_numpy(), frame["score"].to_numpy())
        curve_ax.plot(
            table["mean_score"],
            table["positive_rate"],
            line_style(model),
            color=colours[model],
            marker="o",
            markersize=4,
            label=model,
        )
        hist_ax.hist(
            frame["score"],
            bins=np.linspace(0, 1, 21),
            histtype="step",
            color=colours[model],
            linestyle=line_style(model),
        )
    curve_ax.set(
        ylabel="observed fraction of positives",
        xlim=(0, 1),
        ylim=(0, 1),
        title=f"{cell_line}: calibration, test ({split_caption(split_mode)})",
    )
    hist_ax.set(xlabel="predicted probability (10 equal-width bins above)", ylabel="pairs")
    curve_ax.legend(fontsize=8, loc="upper left")
    for ax in (curve_ax, hist_ax):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out_png)


# The test-set figures of one cell line, by the name of their file (results/plots/{cell}/{name}.png);
# each takes (cell line, model -> predictions.tsv, PNG path, split mode).
TEST_SET_FIGURES = {"roc_pr": plot_roc_pr, "calibration": plot_calibration}


def plot_comparison(summary_tsv: str | Path, out_png: str | Path) -> None:
    """AUROC and AUPRC with 95% intervals for every (cell line, model or baseline), one row per cell line."""
    table = read_summary(summary_tsv)
    cells, colours = list(dict.fromkeys(table["cell_line"])), palette(table["model"])
    fig, axes = plt.subplots(
        len(cells), 2, figsize=(10, 1.2 + 0.45 * table.groupby("cell_line").size().max() * len(cells)), squeeze=False
    )
    for row, cell in zip(axes, cells):
        part = table[table["cell_line"] == cell].reset_index(drop=True)
        for ax, metric in zip(row, ("auroc", "auprc")):
            for y, entry in part.iterrows():
                ax.errorbar(
                    entry[metric],
                    y,
                    xerr=[[entry[metric] - entry[f"{metric}_lo"]], [entry[f"{metric}_hi"] - entry[metric]]],
                    fmt="D" if entry["kind"] == "baseline" else "o",
                    color=colours[entry["model"]],
                    capsize=3,
                    # a pooled baseline in its baseline's colour, hollow (line_style dash-dots it elsewhere)
                    markerfacecolor="white" if is_pooled_baseline(entry["model"]) else None,
                )
            if metric == "auroc":
                ax.axvline(0.5, color="grey", linestyle=":", label="chance")
                if "oracle_auroc" in part and part["oracle_auroc"].notna().any():
                    oracle = part["oracle_auroc"].dropna().iloc[0]
                    ax.axvline(oracle, color="tab:green", linestyle="--", label="oracle (true probabilities)")
                    keep_inside(ax, oracle)
            else:
                ax.axvline(
                    part["positives"].iloc[0] / part["n_test"].iloc[0],
                    color="grey",
                    linestyle=":",
                    label="prevalence (chance)",
                )
            ax.set_yticks(range(len(part)), part["model"])
            ax.invert_yaxis()
            ax.set(xlabel=f"test {metric.upper()} (95% bootstrap interval)", title=f"{cell}: {metric.upper()}")
            ax.grid(alpha=0.3, axis="x")
            ax.legend(fontsize=7, loc="best")
    pooled = " (hollow: fitted on every cell line)" if any(map(is_pooled_baseline, table["model"])) else ""
    fig.suptitle(f"Transformers (circles) against baselines (diamonds{pooled}), held-out test pairs")
    fig.tight_layout(rect=(0, 0, 1, 0.99))  # keep the title clear of the first row's panel titles
    save_figure(fig, out_png)


def keep_inside(ax, x: float, margin: float = 0.02) -> None:
    """Widen the x-axis so that a reference line at `x` lies inside it, not on its edge (axvline extends the
    limits to the line exactly, where the frame hides it)."""
    low, high = ax.get_xlim()
    ax.set_xlim(min(low, x - margin), max(high, x + margin))


def plot_cost(summary_tsv: str | Path, out_png: str | Path) -> None:
    """Test AUROC (95% interval) against training time for every Transformer, one panel per cell line.

    Marker shape says the input (circle: the two element windows; square: the span), colour the
    model (`palette`, as in the run's other figures). The oracle and, where the truth table gives
    it, the best AUROC the element windows allow are drawn as lines.
    """
    table = read_summary(summary_tsv)
    colours = palette(table["model"])
    table = table[table["kind"] == "transformer"]
    cells = list(dict.fromkeys(table["cell_line"]))
    fig, axes = plt.subplots(1, max(1, len(cells)), figsize=(7.5 * max(1, len(cells)), 5.2), squeeze=False)
    for ax, cell in zip(axes[0], cells):
        part = table[table["cell_line"] == cell]
        for entry in part.itertuples():
            label = entry.model
            if getattr(entry, "epochs_trained", None) is not None and entry.epochs_trained == entry.epochs_trained:
                label += f" ({entry.epochs_trained:.3g} epochs)"  # fewer when a budget stopped it
            # Each model named in the legend, in its colour, not beside its point: models that cost and
            # score alike would print their names over each other and over the reference lines.
            ax.errorbar(
                entry.train_seconds / 60,
                entry.auroc,
                yerr=[[entry.auroc - entry.auroc_lo], [entry.auroc_hi - entry.auroc]],
                fmt="s" if getattr(entry, "input", ELEMENTS_INPUT) == SPAN_INPUT else "o",
                color=colours[entry.model],
                capsize=3,
                label=label,
            )
        for column, style, label in (
            ("oracle_auroc", "--", "oracle (true probabilities)"),
            ("element_ceiling_auroc", ":", "best from the element windows"),
        ):
            if column in part and part[column].notna().any():
                ax.axhline(part[column].dropna().iloc[0], color="tab:green", linestyle=style, label=label)
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=0.8)
        ax.set_xscale("log")
        minutes = part["train_seconds"].dropna() / 60
        if len(minutes):
            ax.set_xlim(minutes.min() / 1.5, minutes.max() * 1.5)
        # Ticks at 1, 2 and 5 of each decade, all labelled: a run whose trainings lie within one decade
        # (the demo's) gets several, not one.
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set(xlabel="training time (minutes, log scale)", ylabel="test AUROC (95% interval)", title=cell)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(
        "Accuracy against training cost: circles read the element windows, squares the span;\n"
        "each model in its colour of the run's other figures",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, out_png)


def plot_transfer(table_tsv: str | Path, model: str, out_png: str | Path) -> None:
    """Train-cell x test-cell heatmaps of AUROC (left) and AUPRC (right) for one model."""
    table = pd.read_csv(table_tsv, sep="\t")
    cells = list(dict.fromkeys(table["train_cell"]))
    size = 2.5 + 0.7 * len(cells)
    # The square heatmaps fill the panels' height: 0.6 inch more keeps their titles inside the figure.
    fig, axes = plt.subplots(1, 2, figsize=(2 * size + 1.5, size + 0.6))
    for ax, metric in zip(axes, ("auroc", "auprc")):
        matrix = table.pivot(index="train_cell", columns="test_cell", values=metric).loc[cells, cells]
        # AUROC on a diverging scale centred on chance, so worse-than-chance transfer shows too.
        cmap, dark = (
            ("coolwarm", lambda v: abs(v - 0.5) > 0.35) if metric == "auroc" else ("viridis", lambda v: v < 0.5)
        )
        image = ax.imshow(matrix.to_numpy(), cmap=cmap, vmin=0, vmax=1)
        for (i, j), value in np.ndenumerate(matrix.to_numpy()):
            ax.text(
                j, i, f"{value:.2f}", ha="center", va="center", fontsize=10, color="white" if dark(value) else "black"
            )
        ax.set_xticks(range(len(cells)), cells, rotation=45, ha="right")
        ax.set_yticks(range(len(cells)), cells)
        ax.set(xlabel="tested on (test split)", ylabel="trained on", title=f"{model}: {metric.upper()}")
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    save_figure(fig, out_png)


def plot_distance_bins(bins_tsv: str | Path, out_png: str | Path) -> None:
    """AUROC (left) and AUPRC (right) within each distance bin of the test pairs, a row per cell line, every model
    and baseline, the distance baseline in black: a model that only learned distance falls to it within bins."""
    table = pd.read_csv(bins_tsv, sep="\t")
    cells, colours = list(dict.fromkeys(table["cell_line"])), palette(table["model"])
    fig, axes = plt.subplots(len(cells), 2, figsize=(12.5, 4.2 * len(cells)), squeeze=False)
    for cell, row_axes in zip(cells, axes):
        here = table[table["cell_line"] == cell]
        lows = list(dict.fromkeys(here["distance_low"]))  # a bin's key: labels are rounded, edges are not
        for name, rows in here.groupby("model", sort=False):
            rows = rows.set_index("distance_low").reindex(lows)
            extra = {"color": colours[name], "linewidth": 2 if name == REFERENCE else 1.5}
            for ax, metric in zip(row_axes, ("auroc", "auprc")):
                ax.plot(range(len(lows)), rows[metric], line_style(name), marker="o", label=name, **extra)
        bins = here.drop_duplicates("distance_low").set_index("distance_low").reindex(lows)
        ticks = [f"{label}\n{n} pairs, {p} +" for label, n, p in zip(bins["bin"], bins["n_test"], bins["positives"])]
        row_axes[0].axhline(0.5, color="grey", linestyle=":", label="chance")
        for ax, metric in zip(row_axes, ("AUROC", "AUPRC")):
            ax.set_xticks(range(len(lows)), ticks, fontsize=7)
            ax.set(xlabel="enhancer-promoter distance (test-set quantile bins)", ylabel=f"{metric} within bin")
            ax.set_title(f"{cell}: {metric} by distance, test")
            ax.grid(alpha=0.3)
        # Beside the panels, not on them: a model's line can lie anywhere from 0.4 to 1.
        row_axes[1].legend(
            *row_axes[0].get_legend_handles_labels(), fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5)
        )
    fig.tight_layout()
    save_figure(fig, out_png)
