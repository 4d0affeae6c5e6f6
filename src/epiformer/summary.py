"""The summary table: one row per (cell line, model) with metrics, intervals and cost.

`summary.tsv` columns: cell_line, model, attention, auroc, auroc_lo, auroc_hi, auprc,
auprc_lo, auprc_hi, f1, mcc, n_test, positives, split_mode, parameters, train_seconds,
tokens_per_s, device, oracle_auroc (empty unless the sample sheet names a truth table,
as the demo does: the AUROC of the true interaction probabilities on the same test pairs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sklearn.metrics import roc_auc_score

from epiformer.fileio import atomic_write_text


@dataclass
class ModelResult:
    cell_line: str
    model: str
    metrics: Path
    description: Path
    predictions: Path
    truth: Path | None = None


def oracle_auroc(predictions: Path, truth: Path) -> float:
    """AUROC of the generator's true probabilities (`p_interact`) on the evaluated pairs."""
    frame = pd.read_csv(predictions, sep="\t").merge(pd.read_csv(truth, sep="\t")[["pair_id", "p_interact"]])
    return float(roc_auc_score(frame["label"], frame["p_interact"]))


def summary_row(result: ModelResult) -> dict:
    metrics = json.loads(Path(result.metrics).read_text())
    description = json.loads(Path(result.description).read_text())
    return {
        "cell_line": result.cell_line,
        "model": result.model,
        "attention": description["model"]["attention"],
        "auroc": metrics["auroc"],
        "auroc_lo": metrics["auroc_ci95"][0],
        "auroc_hi": metrics["auroc_ci95"][1],
        "auprc": metrics["auprc"],
        "auprc_lo": metrics["auprc_ci95"][0],
        "auprc_hi": metrics["auprc_ci95"][1],
        "f1": metrics.get("f1"),
        "mcc": metrics.get("mcc"),
        "n_test": metrics["n_test"],
        "positives": metrics["positives"],
        "split_mode": metrics["split_mode"] + (" (leak-prone)" if metrics["split_mode"] == "random" else ""),
        "parameters": description["parameters"],
        "train_seconds": description["train_seconds"],
        "tokens_per_s": description["tokens_per_s"],
        "device": description["device"],
        "oracle_auroc": oracle_auroc(result.predictions, result.truth) if result.truth else None,
    }


def write_summary(results: list[ModelResult], tsv_path, markdown_path) -> pd.DataFrame:
    table = pd.DataFrame([summary_row(r) for r in results])
    atomic_write_text(Path(tsv_path), table.to_csv(sep="\t", index=False, float_format="%.4g"))
    atomic_write_text(Path(markdown_path), to_markdown(table))
    return table


def to_markdown(table: pd.DataFrame) -> str:
    lines = ["| cell line | model | AUROC (95% CI) | AUPRC (95% CI) | oracle AUROC | parameters | train s |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in table.itertuples():
        oracle = "" if pd.isna(row.oracle_auroc) else f"{row.oracle_auroc:.3f}"
        lines.append(
            f"| {row.cell_line} | {row.model} | {row.auroc:.3f} ({row.auroc_lo:.3f}-{row.auroc_hi:.3f}) | "
            f"{row.auprc:.3f} ({row.auprc_lo:.3f}-{row.auprc_hi:.3f}) | {oracle} | {row.parameters} | "
            f"{row.train_seconds:.0f} |"
        )
    return "\n".join(lines) + "\n"
