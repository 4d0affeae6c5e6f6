"""Write the tables of a docs/results page from a run's own result files.

    python docs/results/write_tables.py PAGE RESULTS_DIR   # e.g. demo results/
    python docs/results/write_tables.py PAGE RESULTS_DIR --run RUN   # a page's second run, e.g. real_random
    python docs/results/write_tables.py PAGE               # again, from the copies kept in docs/results/runs/

The run's `summary.tsv`, `paired_comparison.tsv` (and `breakdown.tsv`, and each model's
`motifs.tsv` as `{cell}.{model}.motifs.tsv`, when present) are copied to
docs/results/runs/RUN/ (RUN: the page's name unless given), with what they are computed from
(`save_recomputable`: test predictions, windows, truth, the commit and config files), so that every
published number can be recomputed from files in the repository; each table of PAGE.md between
`<!-- generated:NAME -->` and `<!-- end generated:NAME -->` is then written anew from the
copies of runs/PAGE/, and each between `<!-- generated:NAME:RUN -->` and
`<!-- end generated:NAME:RUN -->` from those of runs/RUN/. Tables:
- `auroc`: test AUROC, one row per cell line, one column per model and baseline (bold: a
  linear-time model, M7's or a delta rule's, whose computed verdict against its peer baseline is
  "above": its paired interval (of the run's bootstrap unit) above 0 and every replicate above, summary.tsv's
  peer_verdict; a run whose summary has no verdicts bolds nothing, never a point comparison;
  a model trained as replicates: its ensemble, then the replicates' mean ± sd);
- `spread` (replicates): per cell line, the models SPREAD_SHOWN names for the page against the
  better of their baselines, and whether every replicate lies above it, every one below it, or neither;
  then, where the summary has it, the paired difference with its interval and the verdict from both;
- `matched`: distance-matched AUROC by cell line and model or baseline (bold: its interval lies
  above 0.5), with its difference from the distance baseline's (starred: the paired interval lies above 0);
- `cost`: per model, what it reads, test AUROC (95% CI), epochs trained, training time, peak memory;
- `summary`: the run's own summary.md (every metric, interval and paired difference);
- `breakdown` (the long demo): each model's test AUROC split by what it must tell apart, from
  `python benchmarks/studies/long_demo_breakdown.py --out RESULTS_DIR/breakdown.tsv`;
- `paired`: the paired differences PAIRED_SHOWN names for the page, one row per cell line;
- `motifs` (after `make explain`): the top MOTIF_RANKS motifs of M7 (`linear`) per cell line;
- `control`: each span model against its length control (the same spans, the bases between the
  elements shuffled): both AUROCs and the paired difference with its interval;
- `bins`: test AUROC within each distance bin (the run's `distance_bins.tsv`), one row per model
  or baseline, one column per bin;
- `selection`: the run's choice on validation (runs/RUN/results/selection.tsv): each candidate M7's validation
  AUROC per cell line and their mean, the chosen one bold;
- `lottery`, `lottery_9min` (the long demo): the seed lottery's table (runs/RUN/seed_lottery.tsv, or
  seed_lottery_9min.tsv) and how often one seed, the sliding ensembles and the disjoint ones (no seed
  shared) came within 0.05 of the oracle and 0.10 above the element ceiling;
- `goal` (the demos at a known answer): each span model against the demo's goal (GOAL): within
  0.05 AUROC of the oracle, 0.10 above the elements-and-distance ceiling, above distance in every
  distance bin, 0.10 above its length control with the paired interval above 0;
- `recipes`, `epochs` (attentions): each attention's recipe sweep on the long demo's validation split
  (runs/RUN/attention_recipes.tsv, benchmarks/studies/attention_recipes.py's `--out`), the chosen bold; and
  each attention's chosen recipe over seeds at equal epochs (runs/RUN/attention_epochs.tsv, attention_seeds.py
  with `--recipes`): test AUROC by seed and of their ensemble, the ensemble against M7's (paired, promoters
  resampled), insulator found, epochs, pace, memory;
- `delta_op`, `delta_pace` (attentions): the delta rules' op against ELU+1 and their training pace against
  M7's, from runs/RUN/delta_rule_op.tsv and delta_rule_training.tsv (the `--out` of
  benchmarks/delta_rule_op.py and delta_rule_training.py), bold within issue 40's targets (DELTA_TARGETS).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from epiformer.evaluation.summary import read_summary
from epiformer.evaluation.summary_page import difference_text, to_markdown, with_reference
from epiformer.evaluation.verdicts import best_baseline, peer_verdict, replicate_values, spread_verdict

PAGES = Path(__file__).resolve().parent
RUN_FILES = ("summary.tsv", "paired_comparison.tsv", "breakdown.tsv", "distance_bins.tsv")
BASELINE_NAMES = {
    "distance": "distance",
    "kmer": "k-mer",
    "distance_kmer": "distance + k-mer",
    "propensity": "propensity",
    "distance_pooled": "distance (pooled)",
    "kmer_pooled": "k-mer (pooled)",
    "distance_kmer_pooled": "distance + k-mer (pooled)",
    "propensity_pooled": "propensity (pooled)",
}
# The (model, baseline) differences a page's `paired` table shows, in its column order.
PAIRED_SHOWN = {
    "real": [
        ("linear_pooled_distance", "distance"),
        ("linear_pooled_distance", "distance_kmer"),
        ("linear_pooled_distance", "distance_kmer_pooled"),
        ("linear_pooled", "kmer"),
        ("linear_pooled", "kmer_pooled"),
    ],
}
# Per page, the (model, baselines) pairs its `spread` table shows: the model against the better of
# those baselines on test AUROC, beyond its replicates' spread or not.
SPREAD_SHOWN = {
    "real": [
        ("linear", ["kmer", "kmer_pooled"]),
        ("linear_pooled", ["kmer", "kmer_pooled"]),
        ("linear_distance", ["distance", "kmer", "distance_kmer", "kmer_pooled", "distance_kmer_pooled"]),
        ("linear_pooled_distance", ["distance", "kmer", "distance_kmer", "kmer_pooled", "distance_kmer_pooled"]),
    ],
    "demo_long": [("linear_span", ["distance", "kmer", "distance_kmer"])],
    "demo_scale": [("linear_span", ["distance", "kmer", "distance_kmer"])],
}
# The config files each page's own run reads, in Snakemake's order (config/config.yaml, then the overlay).
PAGE_CONFIGS = {
    "demo": ("config/config.yaml",),
    "demo_long": ("config/config.yaml", "config/demo_long.yaml"),
    "demo_scale": ("config/config.yaml", "config/demo_scale.yaml"),
    "real": ("config/config.yaml", "config/targetfinder.yaml"),
}
MOTIF_RANKS = 5
# The span demos' goal (issue 38): (most below the oracle, least above the ceiling, least above the length control).
GOAL = {"oracle_gap": 0.05, "ceiling_lead": 0.10, "control_lead": 0.10}
ENSEMBLE_OF_LOTTERY = 3  # benchmarks/studies/seed_lottery.py's ENSEMBLE: seeds s, s+1, s+2


def auroc_table(summary: pd.DataFrame) -> str:
    """Test AUROC by cell line (rows) and model or baseline (columns), in the summary's order."""
    models = list(dict.fromkeys(summary["model"]))
    header = ["cell line (test pairs, positives)"] + [BASELINE_NAMES.get(m, m) for m in models]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell, rows in summary.groupby("cell_line", sort=False):
        by_model = rows.set_index("model")
        first = rows.iloc[0]
        cells = [f"{cell} ({int(first['n_test']):,}, {int(first['positives']):,})"]
        for model in models:
            if model not in by_model.index:
                cells.append("")
                continue
            row = by_model.loc[model]
            value = f"{row['auroc']:.3f}"
            linear_time = isinstance(row.get("attention"), str) and row["attention"] != "softmax"  # M7, the delta rules
            value = f"**{value}**" if linear_time and row.get("peer_verdict") == "above" else value
            cells.append(value + _spread(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _spread(row: pd.Series) -> str:
    """ " (mean ± sd)" of a model's replicates' AUROC; nothing for one model or a baseline."""
    if pd.isna(row.get("replicates")) or row["replicates"] < 2:
        return ""
    return f" ({row['replicate_auroc_mean']:.3f} ± {row['replicate_auroc_sd']:.3f})"


def spread_table(summary: pd.DataFrame, shown: list[tuple[str, list[str]]]) -> str:
    """Per cell line, each shown model's ensemble AUROC (replicates' mean ± sd) against the better of its baselines.

    The verdict is `verdicts.spread_verdict`: "every replicate above" or "below" only when every replicate is;
    a cell line without the model or any of its baselines shows "—".
    """
    names = lambda baselines: " or ".join(BASELINE_NAMES.get(b, b) for b in baselines)  # noqa: E731
    header = ["cell line"] + [f"{model} vs {names(baselines)}" for model, baselines in shown]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell in dict.fromkeys(summary["cell_line"]):
        by_model = summary[summary["cell_line"] == cell].set_index("model")
        cells = [cell]
        for model, baselines in shown:
            best = best_baseline(summary, cell, baselines)
            if model not in by_model.index or best is None:
                cells.append("—")
                continue
            row, (baseline, bar) = by_model.loc[model], best
            verdict = spread_verdict(replicate_values(row), bar) or "one replicate: no spread"
            cells.append(
                f"{row['auroc']:.3f}{_spread(row)} vs {BASELINE_NAMES.get(baseline, baseline)} {bar:.3f}: {verdict}"
                + _interval_verdict(summary, row, baseline)
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _interval_verdict(summary: pd.DataFrame, row: pd.Series, baseline: str) -> str:
    """ "; Δ +d [lo, hi]: verdict" against `baseline`, from the summary's paired interval and the replicates'
    spread (`verdicts.peer_verdict`); nothing where the run's summary has no paired interval with it."""
    columns = [f"auroc_diff_{baseline}{end}" for end in ("", "_lo", "_hi")]
    if not set(columns) <= set(row.index) or row[columns].isna().any():
        return ""
    difference, low, high = (float(row[column]) for column in columns)
    return f"; Δ {difference_text(difference, low, high)}: {peer_verdict(summary, row, baseline)}"


def matched_table(summary: pd.DataFrame) -> str:
    """Distance-matched AUROC by cell line (rows) and model or baseline (columns), read against both references:
    bold where its 95% interval lies above 0.5 (it ranks pairs of one distance better than chance), and in
    parentheses its difference from the distance baseline's matched AUROC, starred where that paired interval
    lies above 0. Distance's own matched AUROC strays from 0.5 by the ties and residual distance within a
    stratum (0.38-0.55 on the real data), so a gain over it alone is no gain over chance."""
    column = "matched_auroc_diff_distance"
    models = list(dict.fromkeys(summary["model"]))
    header = ["cell line"] + [BASELINE_NAMES.get(m, m) for m in models]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell, rows in summary.groupby("cell_line", sort=False):
        by_model = rows.set_index("model")
        cells = [cell]
        for model in models:
            row = by_model.loc[model] if model in by_model.index else None
            if row is None or pd.isna(row.get("matched_auroc")):
                cells.append("")
                continue
            value = f"{row['matched_auroc']:.3f}"
            value = f"**{value}**" if row["matched_auroc_lo"] > 0.5 else value
            if not pd.isna(row.get(column)):
                star = "*" if row[f"{column}_lo"] > 0 else ""
                value += f" (Δ {row[column]:+.3f}{star})"
            cells.append(value)
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
    """benchmarks/studies/long_demo_breakdown.py's table: one row per model, AUROC within each comparison."""
    table = pd.read_csv(run / "breakdown.tsv", sep="\t")
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for _, row in table.iterrows():
        values = [row["model"]] + [f"{row[c]:.3f}" if pd.notna(row[c]) else "-" for c in table.columns[1:]]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def paired_table(paired: pd.DataFrame, shown: list[tuple[str, str]]) -> str:
    """Test AUROC differences (model minus baseline, [95% paired bootstrap interval]) by cell line."""
    auroc = paired[paired["metric"] == "auroc"].set_index(["cell_line", "model", "baseline"])
    header = ["cell line"] + [f"{model} vs {BASELINE_NAMES.get(baseline, baseline)}" for model, baseline in shown]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cell in dict.fromkeys(paired["cell_line"]):
        cells = [cell]
        for model, baseline in shown:
            row = auroc.loc[(cell, model, baseline)]
            cells.append(difference_text(row["difference"], row["lo"], row["hi"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def control_table(paired: pd.DataFrame) -> str:
    """Each span model against its length control: AUROCs, the paired difference [95% interval], the verdict."""
    paired = with_reference(paired)
    controls = paired[(paired["reference"] == "length_control") & (paired["metric"] == "auroc")]
    header = ["cell line", "span model", "AUROC", "length control", "AUROC", "Δ AUROC [95% CI]", "gain beyond length"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in controls.iterrows():
        verdict = "yes" if row["lo"] > 0 else ("no: the control is better" if row["hi"] < 0 else "no")
        lines.append(
            f"| {row['cell_line']} | {row['model']} | {row['model_value']:.3f} | {row['baseline']} | "
            f"{row['baseline_value']:.3f} | {difference_text(row['difference'], row['lo'], row['hi'])} | {verdict} |"
        )
    return "\n".join(lines)


def bins_table(run: Path) -> str:
    """Test AUROC within each distance bin: one row per (cell line, model or baseline), one column per bin."""
    bins = pd.read_csv(run / "distance_bins.tsv", sep="\t")
    edges = bins.drop_duplicates("bin").sort_values("distance_low")
    header = ["cell line", "model"] + [
        f"{low / 1000:,.0f}-{high / 1000:,.0f} kb" for low, high in zip(edges["distance_low"], edges["distance_high"])
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (cell, model), rows in bins.groupby(["cell_line", "model"], sort=False):
        by_bin = rows.set_index("bin")["auroc"]
        values = [f"{by_bin[b]:.3f}" if b in by_bin.index and pd.notna(by_bin[b]) else "" for b in edges["bin"]]
        lines.append("| " + " | ".join([cell, BASELINE_NAMES.get(model, model), *values]) + " |")
    return "\n".join(lines)


def goal_table(summary: pd.DataFrame, paired: pd.DataFrame, run: Path) -> str:
    """Each span model (not a length control) against GOAL: its gap to the oracle, its lead over the
    elements-and-distance ceiling, the distance bins where it beats distance, its lead over its length control."""
    bins = pd.read_csv(run / "distance_bins.tsv", sep="\t")
    controls = with_reference(paired)
    controls = controls[(controls["reference"] == "length_control") & (controls["metric"] == "auroc")]
    header = ["cell line", "model", "AUROC", "below the oracle", "above the ceiling", "bins above distance",
              "above its length control [95% CI]", "goal met"]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    spans = summary[(summary["input"] == "span") & (summary["between"] != "shuffled")]
    for _, row in spans.iterrows():
        cell, model = row["cell_line"], row["model"]
        gap, lead = row["oracle_auroc"] - row["auroc"], row["auroc"] - row["element_ceiling_auroc"]
        in_cell = bins[bins["cell_line"] == cell].set_index(["model", "bin"])["auroc"]
        edges = bins.loc[bins["cell_line"] == cell, "bin"].unique()
        won = sum(in_cell.get((model, b), float("nan")) > in_cell.get(("distance", b), float("nan")) for b in edges)
        control = controls[(controls["cell_line"] == cell) & (controls["model"] == model)]
        if control.empty:
            control_cell, control_met = "no control", False
        else:
            c = control.iloc[0]
            control_cell = difference_text(c["difference"], c["lo"], c["hi"])
            control_met = c["difference"] >= GOAL["control_lead"] and c["lo"] > 0
        met = gap <= GOAL["oracle_gap"] and lead >= GOAL["ceiling_lead"] and won == len(edges) and control_met
        lines.append(
            f"| {cell} | {model} | {row['auroc']:.3f} | {gap:.3f} | {lead:+.3f} | {won} of {len(edges)} | "
            f"{control_cell} | {'yes' if met else 'no'} |"
        )
    return "\n".join(lines)


def motifs_table(run: Path, model: str = "linear") -> str:
    """The top MOTIF_RANKS motifs of `model` per cell line: name (sign, Tomtom q-value)."""
    files = sorted(run.glob(f"*.{model}.motifs.tsv"))
    if not files:
        raise SystemExit(f"{run} has no *.{model}.motifs.tsv: give a results/ folder after `make explain`.")
    tables = {path.name.split(".")[0]: pd.read_csv(path, sep="\t") for path in files}
    lines = ["| rank | " + " | ".join(tables) + " |", "|---|" + "---|" * len(tables)]
    for rank in range(1, MOTIF_RANKS + 1):
        cells = [str(rank)]
        for table in tables.values():
            row = table[table["rank"] == rank]
            if row.empty:
                cells.append("")
                continue
            row = row.iloc[0]
            sign = "+" if row["sign"] == "+" else "−"
            cells.append(f"{row['motif']} ({sign}, q {_q_value(row['q_value'])})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def selection_table(run: Path) -> str:
    """The run's choice on validation (its results/selection.tsv): per candidate model, each cell line's validation
    AUROC and their mean, the chosen one bold; written before any test metric, from validation predictions only."""
    path = run / "results" / "selection.tsv"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: save the run with its selection.tsv (write_tables.py PAGE RESULTS).")
    table = pd.read_csv(path, sep="\t")
    candidates = table[table["candidate"].astype(str) == "True"]
    cells = list(dict.fromkeys(candidates["cell_line"]))
    header = ["model (validation AUROC)"] + [
        f"{cell} ({count} pairs)"
        for cell, count in candidates.groupby("cell_line", sort=False)["val_pairs"].first().items()
    ]
    header.append("mean")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, rows in candidates.groupby("model", sort=False):
        by_cell = rows.set_index("cell_line")["val_auroc"]
        chosen = bool(rows["chosen"].astype(str).eq("True").any())
        name = f"**{model}** (chosen)" if chosen else model
        mean = f"{rows['mean_val_auroc'].iloc[0]:.3f}"
        lines.append(
            "| "
            + " | ".join([name, *(f"{by_cell[cell]:.3f}" for cell in cells), f"**{mean}**" if chosen else mean])
            + " |"
        )
    return "\n".join(lines)


def _q_value(q: float) -> str:
    if q >= 1e-3:
        return f"{q:.2g}"
    mantissa, exponent = f"{q:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def summary_tables(summary: pd.DataFrame, paired: pd.DataFrame | None) -> str:
    return to_markdown(summary, paired).strip()


def lottery_table(run: Path, tsv: str) -> str:
    """A seed lottery (`benchmarks/studies/seed_lottery.py --out`): per base seed s, one seed and the ensemble of
    seeds s, s+1, s+2, each against the oracle (within 0.05) and the element ceiling (0.10 above it); then how often
    each found the insulator, the ensembles that share no seed (bases 0, 3, 6, ...) apart from the sliding ones."""
    table = pd.read_csv(run / tsv, sep="\t")
    oracle, ceiling = table["oracle_auroc"].iloc[0], table["element_ceiling_auroc"].iloc[0]
    width, gap, lead = ENSEMBLE_OF_LOTTERY, GOAL["oracle_gap"], GOAL["ceiling_lead"]
    near, above = oracle - gap, ceiling + lead

    def marks(auroc: float) -> str:
        return f"{auroc:.3f} | {'yes' if auroc >= near else 'no'} | {'yes' if auroc >= above else 'no'}"

    lines = [
        f"| base seed | one seed | near the oracle | above the ceiling | ensemble of {width} | near the oracle | "
        "above the ceiling | disjoint | epochs | validation AUROC by epoch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        epochs = str(row.val_auroc_by_epoch).replace(";", " ")
        disjoint = "yes" if row.base_seed % width == 0 else ""
        lines.append(
            f"| {row.base_seed} | {marks(row.single_auroc)} | {marks(row.ensemble3_auroc)} | {disjoint} | "
            f"{row.epochs_trained:.1f} | {epochs} |"
        )
    disjoint = table[table["base_seed"] % width == 0]
    counts = [
        ("one seed", table["single_auroc"]),
        (f"an ensemble of {width}, sliding (neighbours share {width - 1} seeds)", table["ensemble3_auroc"]),
        (f"an ensemble of {width}, disjoint (no seed shared)", disjoint["ensemble3_auroc"]),
    ]
    lines += [
        "",
        f"| found (oracle {oracle:.3f}, element ceiling {ceiling:.3f}) | within {gap:.2f} of the oracle | "
        f"{lead:.2f} above the ceiling |",
        "|---|---|---|",
    ]
    for label, values in counts:
        lines.append(
            f"| {label} | {(values >= near).sum()} of {len(values)} | {(values >= above).sum()} of {len(values)} |"
        )
    return "\n".join(lines)


# The delta rules' benchmarks (issue 40): variant of benchmarks/delta_rule_op.py -> (rule, scan) shown.
DELTA_OP_SHOWN = {
    "deltanet both ways": ("DeltaNet", "PyTorch"),
    "gated_deltanet both ways": ("Gated DeltaNet", "PyTorch"),
    "deltanet both ways (C++)": ("DeltaNet", "C++"),
    "gated_deltanet both ways (C++)": ("Gated DeltaNet", "C++"),
}
DELTA_TARGETS = {"op": 8.0, "pace": 1 / 3}  # issue 40: at most 8x ELU+1; at least a third of M7's pace
ATTENTION_NAMES = {"linear": "ELU+1 (M7)", "deltanet": "DeltaNet", "gated_deltanet": "Gated DeltaNet"}
SCAN_NAMES = {"torch": "PyTorch", "cpp": "C++"}


def delta_op_table(run: Path) -> str:
    """benchmarks/delta_rule_op.py's medians (--out delta_rule_op.tsv): ELU+1's ms, then each bidirectional delta
    rule's ratio to it, bold where within issue 40's target."""
    medians = pd.read_csv(run / "delta_rule_op.tsv", sep="\t")
    shown = [variant for variant in DELTA_OP_SHOWN if variant in set(medians["variant"])]
    header = ["head size", "T", "ELU+1 (ms)", *(f"{rule}, {scan}" for rule, scan in (DELTA_OP_SHOWN[v] for v in shown))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (head_size, length), rows in medians.groupby(["head_size", "T"], sort=True):
        by_variant = rows.set_index("variant")
        cells = [str(head_size), f"{length:,}", f"{by_variant.loc['linear', 'ms']:.3g}"]
        for variant in shown:
            ratio = by_variant.loc[variant, "ratio_to_linear"]
            cells.append(f"**{ratio:.1f}x**" if ratio <= DELTA_TARGETS["op"] else f"{ratio:.1f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def delta_pace_table(run: Path) -> str:
    """benchmarks/delta_rule_training.py's medians (--out delta_rule_training.tsv): each attention's training pace,
    bold where within issue 40's target."""
    medians = pd.read_csv(run / "delta_rule_training.tsv", sep="\t")
    lines = ["| attention | scan | s a step | tokens/s | pace against M7 |", "|---|---|---|---|---|"]
    for row in medians.itertuples():
        scan = "" if row.attention == "linear" else SCAN_NAMES.get(row.scan, row.scan)
        pace = f"{row.pace_against_m7:.2f}"
        if row.attention != "linear" and row.pace_against_m7 >= DELTA_TARGETS["pace"]:
            pace = f"**{pace}**"
        name = ATTENTION_NAMES.get(row.attention, row.attention)
        lines.append(f"| {name} | {scan} | {row.seconds_a_step:.3f} | {row.tokens_per_s:,.0f} | {pace} |")
    return "\n".join(lines)


def recipes_table(run: Path) -> str:
    """benchmarks/studies/attention_recipes.py's sweep (--out attention_recipes.tsv): per attention and recipe, the
    validation AUROC of each seed and their mean, the chosen recipe bold (validation only: no test figure)."""
    table = pd.read_csv(run / "attention_recipes.tsv", sep="\t")
    keys = [key for key in ("learning_rate", "weight_decay", "dropout") if key in table]
    header = ["attention", *(key.replace("_", " ") for key in keys), "validation AUROC (by seed)", "mean", "epochs"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.itertuples():
        mean = f"{row.mean_val_auroc:.3f}"
        cells = [ATTENTION_NAMES.get(row.attention, row.attention), *(f"{getattr(row, key):g}" for key in keys)]
        seeds = ", ".join(f"{float(value):.3f}" for value in str(row.val_aurocs).split(";"))
        cells += [seeds, f"**{mean}** (chosen)" if str(row.chosen) == "True" else mean, f"{row.median_epochs:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _value_range(values: pd.Series, digits: int) -> str:
    """ "low-high" of a column's values (one value where they agree), with thousands separators."""
    return "-".join(f"{value:,.{digits}f}" for value in sorted({values.min(), values.max()}))


def epochs_table(run: Path) -> str:
    """benchmarks/studies/attention_seeds.py with --recipes (--out attention_epochs.tsv): per attention, its chosen
    recipe, test AUROC by seed and of the seeds' ensemble, the ensemble against M7's (paired interval resampling
    promoters, and where the seeds lie against M7's), how many found the insulator, epochs, pace, memory."""
    table = pd.read_csv(run / "attention_epochs.tsv", sep="\t")
    first = table.iloc[0]
    header = ["attention", "recipe (rate, decay, dropout)", "test AUROC by seed", "ensemble", "against M7's ensemble"]
    header += ["found", "epochs", "tokens/s", "memory"]
    lines = [
        f"Oracle {first['oracle_auroc']:.3f}, element-only ceiling {first['element_ceiling_auroc']:.3f}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for attention, rows in table.groupby("attention", sort=False):
        rows = rows.sort_values("seed")
        row = rows.iloc[0]
        against = "" if pd.isna(row.get("vs_m7")) else (
            f"{row['vs_m7']:+.3f} [{row['vs_m7_lo']:+.3f}, {row['vs_m7_hi']:+.3f}], {row['vs_m7_seeds']}"
        )  # fmt: skip
        cells = [
            ATTENTION_NAMES.get(attention, attention),
            f"{row['learning_rate']:g}, {row['weight_decay']:g}, {row['dropout']:g}",
            ", ".join(f"{value:.3f}" for value in rows["auroc"]),
            f"{row['ensemble_auroc']:.3f}",
            against,
            f"{int(rows['found'].sum())} of {len(rows)}",
            _value_range(rows["epochs_trained"], 1),
            _value_range(rows["tokens_per_s"], 0),
            _value_range(rows["peak_memory_mb"], 0) + " MB",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


BENCHMARK_TABLES = {  # from a benchmark's or a study's TSV in runs/RUN/, not a run's summary
    "delta_op": delta_op_table,
    "delta_pace": delta_pace_table,
    "recipes": recipes_table,
    "epochs": epochs_table,
}


def render(name: str, run: Path, page: str) -> str:
    if name in BENCHMARK_TABLES:
        return BENCHMARK_TABLES[name](run)
    if not (run / "summary.tsv").is_file():
        raise SystemExit(f"{run}/summary.tsv is missing: give that run's results/ folder (with --run {run.name}).")
    summary = read_summary(run / "summary.tsv")
    paired_path = run / "paired_comparison.tsv"
    paired = pd.read_csv(paired_path, sep="\t") if paired_path.exists() else None
    tables = {
        "auroc": auroc_table,
        "cost": cost_table,
        "summary": lambda s: summary_tables(s, paired),
        "breakdown": lambda s: breakdown_table(run),
        "paired": lambda s: paired_table(paired, PAIRED_SHOWN[page]),
        "spread": lambda s: spread_table(s, SPREAD_SHOWN[page]),
        "matched": matched_table,
        "motifs": lambda s: motifs_table(run),
        "control": lambda s: control_table(paired),
        "bins": lambda s: bins_table(run),
        "goal": lambda s: goal_table(s, paired, run),
        "selection": lambda s: selection_table(run),
        "lottery": lambda s: lottery_table(run, "seed_lottery.tsv"),
        "lottery_9min": lambda s: lottery_table(run, "seed_lottery_9min.tsv"),
    }
    if name not in tables:
        raise SystemExit(f"unknown table {name!r}: one of {', '.join([*tables, *BENCHMARK_TABLES])}")
    return tables[name](summary)


def save_run(results: Path, saved: Path, configs: list[str]) -> None:
    """Copy a run's result files (RUN_FILES and each model's motifs.tsv) to `saved`, and what recomputes them
    (`save_recomputable`)."""
    if not (results / "summary.tsv").is_file():
        raise SystemExit(f"{results} has no summary.tsv: give a run's results/ folder.")
    saved.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        if (results / name).is_file():
            shutil.copyfile(results / name, saved / name)
    for motifs in results.glob("*/*/motifs.tsv"):
        shutil.copyfile(motifs, saved / f"{motifs.parent.parent.name}.{motifs.parent.name}.motifs.tsv")
    save_recomputable(results, saved, configs)


def save_recomputable(results: Path, saved: Path, configs: list[str]) -> None:
    """Keep in `saved` what every published metric of the run is computed from: `saved/results/` mirrors the
    run's results/ for each evaluated model and baseline (metrics.json, model.json, a pooled model's in
    pooled/MODEL/ as the workflow keeps it, test predictions, each replicate's, and the validation predictions
    with the run's selection.tsv), with each cell line's windows (test pairs) and truth table (demos) gzipped;
    provenance.json gives the commit the run was made from and its config files.
    tests/infrastructure/test_saved_runs.py recomputes the published tables from them."""
    mirror = saved / "results"
    shutil.rmtree(mirror, ignore_errors=True)
    tested: dict[str, set] = {}
    for metrics in sorted(results.glob("*/*/metrics.json")):
        folder = metrics.parent
        if not (folder / "predictions.tsv").is_file():
            continue
        cell, model = folder.parent.name, folder.name
        target = mirror / cell / model
        target.mkdir(parents=True)
        shutil.copyfile(metrics, target / "metrics.json")
        pooled = results / "pooled" / model / "model.json"  # kept where the workflow keeps it: it says "pooled"
        if (folder / "model.json").is_file():
            shutil.copyfile(folder / "model.json", target / "model.json")
        elif pooled.is_file():
            (mirror / "pooled" / model).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pooled, mirror / "pooled" / model / "model.json")
        own = [folder / "predictions.tsv", *sorted(folder.glob("replicates/*/predictions.tsv"))]
        for predictions in own + [path for path in [folder / "validation_predictions.tsv"] if path.is_file()]:
            destination = target / predictions.relative_to(folder).with_suffix(".tsv.gz")
            destination.parent.mkdir(parents=True, exist_ok=True)
            write_gzip(destination, predictions.read_bytes())
        tested.setdefault(cell, set()).update(pd.read_csv(folder / "predictions.tsv", sep="\t")["pair_id"])
    if (results / "selection.tsv").is_file():  # the run's choice on validation, recomputed from the validation files
        shutil.copyfile(results / "selection.tsv", mirror / "selection.tsv")
    root = run_root(results)
    for cell, pair_ids in tested.items():
        tables = {"windows.tsv": results / cell / "windows.tsv"}
        for truth in results.parent.glob(f"resources/*/{cell}.truth.tsv"):  # a demo's truth table
            tables["truth.tsv"] = truth
        for name, path in tables.items():
            if path.is_file():
                table = pd.read_csv(path, sep="\t")
                kept = table[table["pair_id"].isin(pair_ids)]
                write_gzip(mirror / cell / f"{name}.gz", kept.to_csv(sep="\t", index=False).encode())
        if (results / cell / "windows_stats.json").is_file():
            shutil.copyfile(results / cell / "windows_stats.json", mirror / cell / "windows_stats.json")
    provenance = {"commit": git_output(root, "rev-parse", "HEAD"), "changed_files": None, "config_files": {}}
    if provenance["commit"]:
        provenance["changed_files"] = git_output(root, "status", "--porcelain", "--untracked-files=no").splitlines()
    for name in configs:
        path = (root or results.parent) / name
        if not path.is_file():
            raise SystemExit(f"{path}: no such config file of the run; give --config with the files it ran with.")
        provenance["config_files"][name] = path.read_text()
    (saved / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")


def write_gzip(path: Path, data: bytes) -> None:
    """gzip `data` to `path` with no time stamp, so the same run saved twice gives the same bytes."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed:
        packed.write(data)


def run_root(results: Path) -> Path | None:
    """The checkout a run's results/ lies in (its config files and commit), if it lies in one."""
    top = git_output(results, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def git_output(where: Path | None, *arguments: str) -> str:
    """What `git -C where ARGUMENTS` prints, stripped; empty where git or a checkout is missing."""
    if where is None:
        return ""
    try:
        done = subprocess.run(["git", "-C", str(where), *arguments], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def write_page(page: str, results: Path | None, run: str | None = None, configs: list[str] | None = None) -> list[str]:
    """Copy the run's files (if given) to runs/RUN, then rewrite PAGE.md's generated tables; returns their names.

    `configs`: the run's config files, relative to its checkout (default: PAGE_CONFIGS's for the page)."""
    if results is not None:
        if configs is None and page not in PAGE_CONFIGS:
            raise SystemExit(f"give --config with the config files of the run (no default for page {page!r}).")
        save_run(results, PAGES / "runs" / (run or page), configs or list(PAGE_CONFIGS[page]))
    markdown = PAGES / f"{page}.md"
    text = markdown.read_text()
    pattern = re.compile(r"(<!-- generated:(\w+)(?::(\w+))? -->\n).*?(<!-- end generated:\2(?::\3)? -->)", re.S)
    names = [match.group(2) + (f":{match.group(3)}" if match.group(3) else "") for match in pattern.finditer(text)]
    if not names:
        raise SystemExit(f"{markdown} has no <!-- generated:NAME --> ... <!-- end generated:NAME --> block.")
    text = pattern.sub(
        lambda m: m.group(1) + render(m.group(2), PAGES / "runs" / (m.group(3) or page), page) + "\n" + m.group(4), text
    )
    markdown.write_text(text)
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", help="the page's name: demo, demo_long, demo_scale, real or attentions")
    parser.add_argument("results", nargs="?", type=Path, help="a run's results/ folder (default: the saved copies)")
    parser.add_argument(
        "--run", help="where under docs/results/runs/ to keep the run's files (default: the page's name)"
    )
    parser.add_argument(
        "--config",
        action="append",
        help="a config file the run read, relative to its checkout, in the order given to Snakemake (repeat; "
        "default: the page's, PAGE_CONFIGS)",
    )
    args = parser.parse_args(argv)
    names = write_page(args.page, args.results, args.run, args.config)
    print(f"docs/results/{args.page}.md: wrote {', '.join(names)}", file=sys.stderr)


if __name__ == "__main__":
    main()
