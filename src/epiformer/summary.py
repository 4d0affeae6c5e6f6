"""The summary table: one row per (cell line, model or baseline) with metrics, intervals, cost.

`summary.tsv` columns: cell_line, model, kind (transformer or baseline), attention (linear,
softmax; empty for baselines), auroc, auroc_lo, auroc_hi, auprc, auprc_lo, auprc_hi, f1,
mcc, balanced_accuracy, n_test, positives, split_mode, parameters (fitted coefficients for
a baseline), train_seconds, tokens_per_s, device (empty for baselines), oracle_auroc
(empty unless the sample sheet names a truth table, as the demo does: the AUROC of the true
interaction probabilities on the same test pairs).
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
    description: Path | None  # model.json; None for a baseline
    predictions: Path
    truth: Path | None = None


def oracle_auroc(predictions: Path, truth: Path) -> float:
    """AUROC of the generator's true probabilities (`p_interact`) on the evaluated pairs."""
    frame = pd.read_csv(predictions, sep="\t").merge(pd.read_csv(truth, sep="\t")[["pair_id", "p_interact"]])
    return float(roc_auc_score(frame["label"], frame["p_interact"]))


def summary_row(result: ModelResult) -> dict:
    metrics = json.loads(Path(result.metrics).read_text())
    description = json.loads(Path(result.description).read_text()) if result.description else None
    return {
        "cell_line": result.cell_line,
        "model": result.model,
        "kind": "transformer" if description else "baseline",
        "attention": description["model"]["attention"] if description else None,
        "auroc": metrics["auroc"],
        "auroc_lo": metrics["auroc_ci95"][0],
        "auroc_hi": metrics["auroc_ci95"][1],
        "auprc": metrics["auprc"],
        "auprc_lo": metrics["auprc_ci95"][0],
        "auprc_hi": metrics["auprc_ci95"][1],
        "f1": metrics.get("f1"),
        "mcc": metrics.get("mcc"),
        "balanced_accuracy": metrics.get("balanced_accuracy"),
        "n_test": metrics["n_test"],
        "positives": metrics["positives"],
        "split_mode": metrics["split_mode"] + (" (leak-prone)" if metrics["split_mode"] == "random" else ""),
        **(_cost(description) if description else _baseline_cost(metrics)),
        "oracle_auroc": oracle_auroc(result.predictions, result.truth) if result.truth else None,
    }


def _cost(description: dict) -> dict:
    return {key: description[key] for key in ("parameters", "train_seconds", "tokens_per_s", "device")}


def _baseline_cost(metrics: dict) -> dict:
    baseline = metrics.get("baseline", {})
    # No timing: metrics.json stays byte-identical between runs.
    return {"parameters": baseline.get("features", 0) + 1, "train_seconds": None, "tokens_per_s": None,
            "device": None}  # fmt: skip


def write_summary(results: list[ModelResult], tsv_path, markdown_path) -> pd.DataFrame:
    table = pd.DataFrame([summary_row(r) for r in results])
    atomic_write_text(Path(tsv_path), table.to_csv(sep="\t", index=False, float_format="%.4g"))
    atomic_write_text(Path(markdown_path), to_markdown(table))
    return table


def to_markdown(table: pd.DataFrame) -> str:
    lines = ["| cell line | model | AUROC (95% CI) | AUPRC (95% CI) | F1 | MCC | oracle AUROC | parameters | train s |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in table.itertuples():
        name = row.model if row.kind == "transformer" else f"{row.model} (baseline)"
        lines.append(
            f"| {row.cell_line} | {name} | {row.auroc:.3f} ({row.auroc_lo:.3f}-{row.auroc_hi:.3f}) | "
            f"{row.auprc:.3f} ({row.auprc_lo:.3f}-{row.auprc_hi:.3f}) | {_number(row.f1)} | {_number(row.mcc)} | "
            f"{_number(row.oracle_auroc)} | {row.parameters} | {_number(row.train_seconds, '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def _number(value, spec: str = ".3f") -> str:
    return "" if value is None or pd.isna(value) else format(value, spec)
