"""A result table (TSV) as one self-contained HTML page, for `snakemake --report`.

The report shows a TSV as raw text but an HTML result in a frame, so the workflow's tables
go into the report as these pages; the TSVs stay the results. A page carries its own small
stylesheet and nothing else (no scripts, no links), a title, and the path of its TSV. Cells
hold the TSV's text unchanged (the tables are written already rounded), HTML-escaped;
columns whose every filled cell is a number are right-aligned.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pandas as pd

from epiformer.io.files import atomic_write_text

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 13px; color: #222; margin: 1em; }
h1 { font-size: 15px; margin: 0 0 0.2em; }
p { color: #555; margin: 0 0 0.8em; }
table { border-collapse: collapse; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; white-space: nowrap; text-align: left; }
th { position: sticky; top: 0; background: #f0f0f0; }
.number { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafafa; }
tbody tr:hover { background: #eaf1fb; }
"""


def read_table_text(tsv_path: str | Path) -> pd.DataFrame:
    """A TSV with a header, every cell as the text it holds (empty cells stay empty)."""
    return pd.read_csv(tsv_path, sep="\t", dtype=str, keep_default_na=False)


def is_numeric(values: pd.Series) -> bool:
    """Whether every filled cell of a column of strings reads as a number (and one is filled)."""
    filled = values[values != ""]
    return len(filled) > 0 and bool(pd.to_numeric(filled, errors="coerce").notna().all())


def table_html(table: pd.DataFrame, title: str, source: str) -> str:
    """The page for `table` (every cell a string, as `read_table_text` returns), titled, naming its TSV."""
    classes = {column: ' class="number"' if is_numeric(table[column]) else "" for column in table.columns}
    header = "".join(f"<th{classes[column]}>{escape(str(column))}</th>" for column in table.columns)
    rows = "\n".join(
        "<tr>" + "".join(f"<td{classes[column]}>{escape(value)}</td>" for column, value in row.items()) + "</tr>"
        for _, row in table.iterrows()
    )
    shape = f"{len(table)} row{'s' if len(table) != 1 else ''}, {len(table.columns)} columns"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n<p>{escape(source)} (tab-separated): {shape}</p>\n"
        f"<table>\n<thead><tr>{header}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>\n</body>\n</html>\n"
    )


def write_table_html(tsv_path: str | Path, html_path: str | Path, title: str, view: str = "all") -> None:
    """Write the page of the TSV at `tsv_path` to `html_path` (atomically); `view` "summary": `summary_view`."""
    table = read_table_text(tsv_path)
    source = str(tsv_path)
    if view == "summary":
        source = f"{len(table.columns)} columns in {tsv_path}, the readable ones here, to 3 decimals"
        table = summary_view(table)
    atomic_write_text(Path(html_path), table_html(table, title, source))


# summary.tsv's columns the report's summary page shows, as (heading, value column, interval columns or None).
SUMMARY_SHOWN = (
    ("AUROC [95% CI]", "auroc", ("auroc_lo", "auroc_hi")),
    ("AUPRC [95% CI]", "auprc", ("auprc_lo", "auprc_hi")),
    ("distance-matched AUROC [95% CI]", "matched_auroc", ("matched_auroc_lo", "matched_auroc_hi")),
    ("replicates: AUROC mean ± sd", "replicate_auroc_mean", None),
    ("F1", "f1", None),
    ("MCC", "mcc", None),
)


def summary_view(table: pd.DataFrame) -> pd.DataFrame:
    """summary.tsv (as text) as a reader takes it in: who (cell line, model, what it reads), each headline metric
    with its interval in one cell to 3 decimals, the replicates' spread, the test pairs and the training time."""
    who = [column for column in ("cell_line", "model", "kind", "input", "between") if column in table.columns]
    view = table[who].copy()
    for heading, column, interval in SUMMARY_SHOWN:
        if column not in table.columns:
            continue
        if column == "replicate_auroc_mean":
            view[heading] = [
                _mean_sd(m, sd, n) for m, sd, n in zip(table[column], table["replicate_auroc_sd"], table["replicates"])
            ]
        elif interval is None:
            view[heading] = table[column].map(_three)
        else:
            view[heading] = [
                _with_interval(v, lo, hi) for v, lo, hi in zip(table[column], *(table[c] for c in interval))
            ]
    for column in ("n_test", "positives"):
        view[column] = table[column]
    if "train_seconds" in table.columns:
        view["training (s)"] = table["train_seconds"].map(lambda value: _three(value, ".0f"))
    return view


def _three(text: str, spec: str = ".3f") -> str:
    return format(float(text), spec) if text not in ("", "nan") else ""


def _with_interval(value: str, low: str, high: str) -> str:
    if value in ("", "nan"):
        return ""
    return f"{_three(value)} [{_three(low)}, {_three(high)}]" if low not in ("", "nan") else _three(value)


def _mean_sd(mean: str, sd: str, count: str) -> str:
    if count in ("", "nan") or int(float(count)) < 2:
        return ""
    return f"{_three(mean)} ± {_three(sd)} ({int(float(count))})"
