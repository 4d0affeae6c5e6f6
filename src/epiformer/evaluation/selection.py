"""The run's locked choice: which M7 a run puts forward, made from validation predictions alone.

A run that trains several M7 variants (sequence only or with distance, per cell line or pooled,
other recipes as models of their own) must name the one it puts forward without looking at
the test split. `write_selection` reads each (cell line, model)'s `validation_predictions.tsv`
(evaluation's `score_validation`: the ensemble's scores on the validation split) and writes
`results/selection.tsv`: every model's validation AUROC and AUPRC per cell line, its mean
validation AUROC over the run's cell lines (those where every candidate has one: a validation
split of one class has none), and `chosen`, true on the rows of the one model chosen; then each
model's `family` and the choice within it (below). Its
rule's inputs are those files and model.json, no test prediction or metric, so the choice
cannot follow a test result (a test deletes every test prediction and metrics file and
gets the same choice); the summary marks the chosen model and sets it against its peer baseline.
A replicated model is chosen on its ensemble's scores, as it is reported; validation is also
where training picked each model's best epoch, so the figures are optimistic, alike for all.

The rule, fixed here and not per run: among the candidates (models of `CANDIDATE_ATTENTION`,
length controls excluded: they answer another question), the highest mean validation AUROC
over the cell lines, earlier in the config on a tie. AUROC, not AUPRC: it is what the pages
compare, and it does not move with each cell line's prevalence.

The same rule also picks a recipe within each *family* (`family_of`): models that read the same
inputs with the same attention, fitted the same way, and differ only in their recipe (learning
rate, weight decay, dropout, sizes: candidate recipes as models of their own). `chosen_in_family`
marks each family's best by `family_mean_val_auroc` (over the cell lines where every model of the
family has a validation AUROC), so that attentions are compared each at its own recipe, chosen on
validation alone (a family of one model chooses it). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.io.files import atomic_write_text
from epiformer.io.model_description import read_description
from epiformer.io.predictions import read_predictions

SELECTION_TSV = "selection.tsv"
CANDIDATE_ATTENTION = "linear"  # M7: what the run puts forward; its softmax twins are what it is compared with
COLUMNS = (
    "cell_line",
    "model",
    "attention",
    "candidate",
    "val_pairs",
    "val_positives",
    "val_auroc",
    "val_auprc",
    "mean_val_auroc",
    "chosen",
    "family",
    "family_mean_val_auroc",
    "chosen_in_family",
)


@dataclass(frozen=True)
class ValidationResult:
    """One (cell line, model)'s validation predictions and the folder of the model that made them (its model.json)."""

    cell_line: str
    model: str
    predictions: Path
    model_dir: Path


def is_candidate(description: dict) -> bool:
    """Whether a model may be chosen: M7's attention, reading the genome's sequence (no length control)."""
    model = description["model"]
    return model.get("attention") == CANDIDATE_ATTENTION and model.get("between", "sequence") == "sequence"


def family_of(description: dict, model_dir: Path) -> str:
    """A model's family: its attention, then what it reads beyond the element windows' sequence and how it was
    fitted, e.g. "deltanet", "linear+distance+pooled", "linear+span+length control". Models of one family differ
    only in their recipe."""
    model = description["model"]
    parts = [str(model.get("attention"))]
    parts += ["span"] if model.get("input", "elements") == "span" else []
    parts += ["distance"] if model.get("distance") else []
    parts += ["pooled"] if Path(model_dir).parent.name == "pooled" else []  # where the workflow keeps pooled models
    parts += ["length control"] if model.get("between", "sequence") != "sequence" else []
    return "+".join(parts)


def validation_row(result: ValidationResult) -> dict:
    """A (cell line, model)'s row: its validation figures (NaN where the split lacks a class)."""
    frame = read_predictions(result.predictions)
    labels, scores = frame["label"].to_numpy(int), frame["score"].to_numpy(float)
    both = 0 < labels.sum() < len(labels)
    description = read_description(result.model_dir)
    return {
        "cell_line": result.cell_line,
        "model": result.model,
        "attention": description["model"].get("attention"),
        "candidate": is_candidate(description),
        "family": family_of(description, result.model_dir),
        "val_pairs": len(labels),
        "val_positives": int(labels.sum()),
        "val_auroc": float(roc_auc_score(labels, scores)) if both else np.nan,
        "val_auprc": float(average_precision_score(labels, scores)) if both else np.nan,
    }


def selection_table(results: list[ValidationResult]) -> pd.DataFrame:
    """Every result's row (module docstring), in the given order, with the mean and the choice."""
    if not results:
        raise ValueError("no validation predictions to choose from: the run trains no model")
    table = pd.DataFrame([validation_row(result) for result in results])
    table["mean_val_auroc"] = mean_over_shared_cells(table, table["candidate"])
    table["chosen"] = table["model"] == best_model(table[table["candidate"]], "mean_val_auroc")
    by_family = table.groupby("family", sort=False)
    table["family_mean_val_auroc"] = pd.concat(
        [mean_over_shared_cells(rows, pd.Series(True, index=rows.index)) for _, rows in by_family]
    )
    chosen_in_family = [best_model(rows, "family_mean_val_auroc") for _, rows in by_family]
    table["chosen_in_family"] = table["model"].isin(chosen_in_family)
    return table[list(COLUMNS)]


def mean_over_shared_cells(table: pd.DataFrame, compared: pd.Series) -> pd.Series:
    """Each row's model's mean validation AUROC over the cell lines where every compared row's model has one (a
    validation split of one class has none), so that the compared models are averaged over the same cell lines;
    over every cell line where none is compared, NaN where no cell line is shared."""
    compared_rows = table[compared]
    scored = compared_rows.groupby("cell_line", sort=False)["val_auroc"].apply(lambda values: values.notna().all())
    shared = set(scored[scored].index) if not compared_rows.empty else set(table["cell_line"])
    kept = table["val_auroc"].where(table["cell_line"].isin(shared))
    return kept.groupby(table["model"], sort=False).transform("mean")


def best_model(rows: pd.DataFrame, mean: str) -> str | None:
    """The model of `rows` with the highest `mean` column (the first in the table on a tie), or None."""
    means = rows.groupby("model", sort=False)[mean].first().dropna()
    return None if means.empty else str(means.idxmax())


def write_selection(results: list[ValidationResult], path) -> pd.DataFrame:
    """Write selection.tsv atomically; return its table."""
    table = selection_table(results)
    atomic_write_text(Path(path), table.to_csv(sep="\t", index=False, float_format="%.6f"))
    return table


def read_selection(path) -> pd.DataFrame:
    """A selection.tsv, checked to hold its columns and one chosen model at most."""
    path = Path(path)
    table = pd.read_csv(path, sep="\t")
    missing = [column for column in COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"{path}: lacks {', '.join(missing)}; re-run its job (snakemake --forcerun selection)")
    if table.loc[table["chosen"], "model"].nunique() > 1:
        raise ValueError(f"{path}: chooses more than one model; re-run its job (snakemake --forcerun selection)")
    return table


def chosen_names(selection: pd.DataFrame) -> list[str]:
    """The model a selection table chose, as a list (empty when no candidate could be chosen)."""
    return sorted(set(selection.loc[selection["chosen"], "model"]))


def selection_markdown(selection: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """summary.md's section on the choice: each candidate's validation AUROC, and the chosen model on test
    against its peer baseline (summary's `peer_baseline` and `peer_verdict`)."""
    chosen = selection.loc[selection["chosen"], "model"]
    if chosen.empty:
        return []
    name = str(chosen.iloc[0])
    cells = list(dict.fromkeys(selection["cell_line"]))
    candidates = selection[selection["candidate"]]
    lines = [
        "",
        "## Chosen on validation",
        "",
        f"`results/selection.tsv` puts **{name}** forward: of the {CANDIDATE_ATTENTION}-attention models (length "
        "controls aside), the highest validation AUROC averaged over the cell lines, read from each model's "
        "validation predictions alone (the choice reads no test prediction or metric).",
        "",
        "| model | mean validation AUROC | " + " | ".join(cells) + " |",
        "|---|---|" + "---|" * len(cells),
    ]
    for model, rows in candidates.groupby("model", sort=False):
        by_cell = rows.set_index("cell_line")["val_auroc"]
        marked = f"**{model}**" if model == name else model
        lines.append(
            f"| {marked} | {rows['mean_val_auroc'].iloc[0]:.3f} | "
            + " | ".join(f"{by_cell.get(cell, np.nan):.3f}" for cell in cells)
            + " |"
        )
    rows = summary[summary["model"] == name]
    if "peer_verdict" in rows and rows["peer_baseline"].notna().any():
        lines += ["", f"On test, {name} against its peer baseline (section above):", ""]
        lines += ["| cell line | test AUROC | peer baseline | verdict |", "|---|---|---|---|"]
        lines += [
            f"| {row.cell_line} | {row.auroc:.3f} | {row.peer_baseline} | {row.peer_verdict} |"
            for row in rows.itertuples()
        ]
    return lines
