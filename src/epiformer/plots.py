"""Figures: ROC and precision-recall curves per cell line, training curves per model.

Each function takes paths to workflow outputs and writes one PNG; matplotlib runs on the
non-interactive Agg backend so the workflow needs no display.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve  # noqa: E402


def split_caption(split_mode: str) -> str:
    """What every figure says about its split; a random split is flagged as leak-prone."""
    return "held-out chromosomes" if split_mode == "chromosome" else f"{split_mode} split - LEAK-PRONE"


def plot_roc_pr(cell_line: str, predictions: dict[str, str | Path], out_png: str | Path,
                split_mode: str = "chromosome") -> None:  # fmt: skip
    """ROC (left) and precision-recall (right, with the prevalence line) for every model of a cell line."""
    fig, (roc_ax, pr_ax) = plt.subplots(1, 2, figsize=(10, 4.5))
    prevalence = None
    for model, path in predictions.items():
        frame = pd.read_csv(path, sep="\t")
        labels, scores = frame["label"], frame["score"]
        fpr, tpr, _ = roc_curve(labels, scores)
        precision, recall, _ = precision_recall_curve(labels, scores)
        roc_ax.plot(fpr, tpr, label=f"{model} (AUROC {roc_auc_score(labels, scores):.3f})")
        pr_ax.plot(recall, precision, label=f"{model} (AUPRC {average_precision_score(labels, scores):.3f})")
        prevalence = labels.mean()
    roc_ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="chance")
    if prevalence is not None:
        pr_ax.axhline(prevalence, color="grey", linestyle=":", label=f"prevalence {prevalence:.2f}")
    roc_ax.set(xlabel="False positive rate", ylabel="True positive rate", title=f"{cell_line}: ROC, test ({split_caption(split_mode)})")
    pr_ax.set(xlabel="Recall", ylabel="Precision", ylim=(0, 1.02),
               title=f"{cell_line}: precision-recall, test ({split_caption(split_mode)})")  # fmt: skip
    for ax in (roc_ax, pr_ax):
        ax.legend(loc="lower right" if ax is roc_ax else "upper right", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)


def plot_training(cell_line: str, model: str, train_log: str | Path, out_png: str | Path,
                  split_mode: str = "chromosome") -> None:  # fmt: skip
    """Loss (left) and validation AUROC/AUPRC (right) per epoch."""
    log = pd.read_csv(train_log, sep="\t")
    fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=(10, 4))
    loss_ax.plot(log["epoch"], log["train_loss"], marker="o", label="train (class-weighted)")
    loss_ax.plot(log["epoch"], log["val_loss"], marker="o", label="validation")
    metric_ax.plot(log["epoch"], log["val_auroc"], marker="o", label="validation AUROC")
    metric_ax.plot(log["epoch"], log["val_auprc"], marker="o", label="validation AUPRC")
    loss_ax.set(xlabel="epoch", ylabel="binary cross-entropy", title=f"{cell_line} / {model}: loss")
    metric_ax.set(xlabel="epoch", ylabel="score", ylim=(0, 1),
                  title=f"{cell_line} / {model}: validation ({split_caption(split_mode)})")  # fmt: skip
    for ax in (loss_ax, metric_ax):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)


def plot_scaling(table_path: str | Path, out_png: str | Path) -> None:
    """Time (left) and peak memory (right) against tokens, log-log, with O(T) and O(T^2) guides."""
    table = pd.read_csv(table_path, sep="\t")
    fig, (time_ax, memory_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    styles = {"linear": "-", "softmax": "--"}
    for (component, attention), part in table.groupby(["component", "attention"]):
        label = f"{component}, {attention}"
        time_ax.plot(part["tokens"], part["seconds"], styles[attention], marker="o", label=label)
        memory_ax.plot(part["tokens"], part["peak_mb"].clip(lower=0.1), styles[attention], marker="o", label=label)
    anchor = table[(table.component == "attention") & (table.attention == "linear")].sort_values("tokens")
    if len(anchor):
        tokens = anchor["tokens"].to_numpy(float)
        start_t, start_s = tokens[0], anchor["seconds"].iloc[0]
        time_ax.plot(tokens, start_s * tokens / start_t, color="grey", linestyle=":", label="O(T) guide")
        time_ax.plot(tokens, start_s * (tokens / start_t) ** 2, color="black", linestyle=":", label="O(T²) guide")
    time_ax.set(xscale="log", yscale="log", xlabel="tokens T", ylabel="seconds (forward + backward)",
                title="Time per pass")  # fmt: skip
    memory_ax.set(xscale="log", yscale="log", xlabel="tokens T", ylabel="peak extra memory (MB)", title="Peak memory")
    for ax in (time_ax, memory_ax):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    device = table["device"].iloc[0] if len(table) else "?"
    fig.suptitle(f"M7 linear vs softmax attention, batch 1, {device}")
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
