"""Write the tables of a docs/results page from a run's own result files.

    python docs/results/write_tables.py PAGE RESULTS_DIR   # e.g. demo results/
    python docs/results/write_tables.py PAGE               # again, from the copies kept in docs/results/runs/PAGE/

The run's `summary.tsv` and `paired_comparison.tsv` are copied to docs/results/runs/PAGE/, so
that every published number can be recomputed from a file in the repository; each table of
PAGE.md between `<!-- generated:NAME -->` and `<!-- end generated:NAME -->` is then written
anew from those copies. Tables:
- `auroc`: test AUROC, one row per cell line, one column per model and baseline (bold: a
  linear-attention model at least as good as the better of the distance and k-mer baselines);
- `cost`: per model, what it reads, test AUROC (95% CI), epochs trained, training time, peak memory;
- `summary`: the run's own summary.md (every metric, interval and paired difference);
- `breakdown` (the long demo): each model's test AUROC split by what it must tell apart, from
  `python benchmarks/long_demo_breakdown.py --out RESULTS_DIR/breakdown.tsv`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

from epiformer.evaluation.summary import to_markdown

PAGES = Path(__file__).resolve().parent
RUN_FILES = ("summary.tsv", "paired_comparison.tsv", "breakdown.tsv")
BASELINE_NAMES = {"distance": "distance", "kmer": "k-mer", "propensity": "propensity"}


def auroc_table(summary: pd.DataFrame) -> str:
    """Test AUROC by cell line (rows) and model or baseline (columns), in the summary's order."""
    models = list(dict.fromkeys(summary["model"]))
    header = ["cell line (test pairs, positives)"] + [BASELINE_NAMES.get(m, m) for m in models]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell, rows in summary.groupby("cell_line", sort=False):
        by_model = rows.set_index("model")
        baselines = [by_model.loc[name, "auroc"] for name in ("distance", "kmer") if name in by_model.index]
        bar = max(baselines) if baselines else float("inf")
        first = rows.iloc[0]
        cells = [f"{cell} ({int(first['n_test']):,}, {int(first['positives']):,})"]
        for model in models:
            if model not in by_model.index:
                cells.append("")
                continue
            row = by_model.loc[model]
            value = f"{row['auroc']:.3f}"
            cells.append(f"**{value}**" if row.get("attention") == "linear" and row["auroc"] >= bar else value)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(summary: pd.DataFrame) -> str:
    """Per model: what it reads, test AUROC (95% CI), epochs trained, training seconds and peak memory."""
    header = ["cell line", "model", "reads", "AUROC (95% CI)", "epochs trained", "training", "peak memory"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in summary.iterrows():
        transformer = row["kind"] == "transformer"
        reads = {"elements": "element windows", "span": "span"}.get(row["input"], row["input"])
        lines.append(
            "| "
            + " | ".join(
                [
                    row["cell_line"],
                    row["model"] if transformer else f"{row['model']} (baseline)",
                    reads if row["model"] != "distance" else "distance only",
                    f"{row['auroc']:.3f} ({row['auroc_lo']:.3f}–{row['auroc_hi']:.3f})",
                    f"{row['epochs_trained']:.2f}" if transformer else "",
                    f"{row['train_seconds']:.0f} s" if transformer else "",
                    f"{row['peak_memory_mb'] / 1024:.1f} GB" if transformer else "",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def breakdown_table(run: Path) -> str:
    """benchmarks/long_demo_breakdown.py's table: one row per model, AUROC within each comparison."""
    table = pd.read_csv(run / "breakdown.tsv", sep="\t")
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for _, row in table.iterrows():
        values = [row["model"]] + [f"{row[c]:.3f}" if pd.notna(row[c]) else "-" for c in table.columns[1:]]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def summary_tables(summary: pd.DataFrame, paired: pd.DataFrame | None) -> str:
    return to_markdown(summary, paired).strip()


def render(name: str, run: Path) -> str:
    summary = pd.read_csv(run / "summary.tsv", sep="\t")
    paired_path = run / "paired_comparison.tsv"
    paired = pd.read_csv(paired_path, sep="\t") if paired_path.exists() else None
    tables = {
        "auroc": auroc_table,
        "cost": cost_table,
        "summary": lambda s: summary_tables(s, paired),
        "breakdown": lambda s: breakdown_table(run),
    }
    if name not in tables:
        raise SystemExit(f"unknown table {name!r}: one of {', '.join(tables)}")
    return tables[name](summary)


def write_page(page: str, results: Path | None) -> list[str]:
    """Copy the run's files (when given), then rewrite every generated table of PAGE.md; returns their names."""
    saved = PAGES / "runs" / page
    if results is not None:
        missing = [name for name in RUN_FILES[:1] if not (results / name).is_file()]
        if missing:
            raise SystemExit(f"{results} has no {', '.join(missing)}: give a run's results/ folder.")
        saved.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            if (results / name).is_file():
                shutil.copyfile(results / name, saved / name)
    markdown = PAGES / f"{page}.md"
    text = markdown.read_text()
    pattern = re.compile(r"(<!-- generated:(\w+) -->\n).*?(<!-- end generated:\2 -->)", re.S)
    names = [match.group(2) for match in pattern.finditer(text)]
    if not names:
        raise SystemExit(f"{markdown} has no <!-- generated:NAME --> ... <!-- end generated:NAME --> block.")
    text = pattern.sub(lambda m: m.group(1) + render(m.group(2), saved) + "\n" + m.group(3), text)
    markdown.write_text(text)
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", help="the page's name: demo, demo_long or real")
    parser.add_argument("results", nargs="?", type=Path, help="a run's results/ folder (default: the saved copies)")
    args = parser.parse_args(argv)
    names = write_page(args.page, args.results)
    print(f"docs/results/{args.page}.md: wrote {', '.join(names)}", file=sys.stderr)


if __name__ == "__main__":
    main()
