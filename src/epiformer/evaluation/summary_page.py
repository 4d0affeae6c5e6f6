"""summary.md: the run's summary table (`evaluation.summary`) as a page a reader reads, not a TSV.

One section per question: the results with their intervals, the peer verdicts (each model
against the strongest baseline that reads what it reads), the replicates' spread, the
measures within distance, the pairs dropped for their span, and the paired differences (a
model minus each baseline, a span model minus its length control). Every verdict is computed
from an interval (`evaluation.verdicts`), never typed. The results pages (docs/results/) are
written with the same functions.
"""

from __future__ import annotations

import pandas as pd

from epiformer.evaluation.distance import REFERENCE
from epiformer.evaluation.verdicts import best_baseline, replicate_values, spread_verdict

PAIRED_METRIC_NAMES = ("auroc", "auprc")  # the paired comparison's metrics, in the order tables show them


def to_markdown(table: pd.DataFrame, paired: pd.DataFrame | None = None, selection: list[str] = ()) -> str:
    """summary.md: the summary table and, when given, the paired differences and the `selection` section."""
    lines = [
        "| cell line | model | AUROC (95% CI) | AUPRC (95% CI) | F1 | MCC | oracle AUROC | parameters | train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        name = row.model if row.kind == "transformer" else f"{row.model} (baseline)"
        lines.append(
            f"| {row.cell_line} | {name} | {row.auroc:.3f} ({row.auroc_lo:.3f}-{row.auroc_hi:.3f}) | "
            f"{row.auprc:.3f} ({row.auprc_lo:.3f}-{row.auprc_hi:.3f}) | {_number(row.f1)} | {_number(row.mcc)} | "
            f"{_number(row.oracle_auroc)} | {row.parameters} | {_number(row.train_seconds, '.0f')} |"
        )
    lines += dropped_markdown(table)
    lines += peer_markdown(table)
    lines += list(selection)
    if paired is not None and len(paired):
        lines += ["", *paired_markdown(paired)]
    lines += replicates_markdown(table)
    lines += within_distance_markdown(table)
    return "\n".join(lines) + "\n"


def peer_markdown(table: pd.DataFrame) -> list[str]:
    """The summary.md section that sets each model against its peer baseline (`verdicts.with_peer_columns`)."""
    if "peer_baseline" not in table or table["peer_baseline"].isna().all():
        return []
    unit = table["bootstrap_unit"].iloc[0]
    lines = [
        "",
        "## Each model against its peer baseline",
        "",
        "A model's peer: the strongest baseline by test AUROC, pooled or per cell line, that reads nothing the "
        "model does not (distance, k-mers or both for a model given distance or reading spans, a span's length "
        "being its distance; k-mers for sequence alone), so a model is never set against a weaker bar than one "
        "it could be. "
        f"Δ AUROC: model − peer on the same test pairs, its 95% "
        f"interval from paired resamples of whole {unit} groups. The verdict is computed: above or below only when "
        "the interval excludes 0 and every replicate lies on that side of the peer.",
        "",
        "| cell line | model | reads | peer baseline | peer AUROC | model AUROC | Δ AUROC [95% CI] | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    auroc = table.set_index(["cell_line", "model"])["auroc"]
    for _, row in table.dropna(subset=["peer_baseline"]).iterrows():
        peer = row["peer_baseline"]
        difference = (row[f"auroc_diff_{peer}"], row[f"auroc_diff_{peer}_lo"], row[f"auroc_diff_{peer}_hi"])
        lines.append(
            f"| {row['cell_line']} | {row['model']} | {row['reads']} | {peer} | "
            f"{auroc[(row['cell_line'], peer)]:.3f} | {row['auroc']:.3f} | "
            f"{difference_text(*difference)} | {row['peer_verdict']} |"
        )
    return lines


def replicates_markdown(table: pd.DataFrame) -> list[str]:
    """The summary.md section on models trained as replicates: the ensemble against the spread of its members."""
    if "replicates" not in table or not (table["replicates"].fillna(1) > 1).any():
        return []
    lines = [
        "",
        "## Replicates: the ensemble and the spread of its members",
        "",
        "Each model trained with several seeds on the same split (train.replicates, or the model's own "
        "`replicates`); the rows above score their "
        "ensemble (mean probability). A difference between two models smaller than their replicates' sd is one "
        "a seed could make. Last column: the model's peer baseline (as in 'Each model against its peer "
        "baseline'; without one, the cell line's best baseline), and whether every replicate lies above it, "
        "every one below it, or the baseline lies within the replicates' spread (a retrained model could land on "
        "either side).",
        "",
        "| cell line | model | replicates | ensemble AUROC | replicate AUROC mean ± sd | ensemble AUPRC | "
        "replicate AUPRC mean ± sd | each replicate's AUROC | the replicates against the best baseline's AUROC |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table[table["replicates"].fillna(1) > 1].itertuples():
        best = _peer_or_best(table, row)
        against = "" if best is None else f"{best[0]} {best[1]:.3f}: {spread_verdict(replicate_values(row), best[1])}"
        lines.append(
            f"| {row.cell_line} | {row.model} | {int(row.replicates)} | {row.auroc:.3f} | "
            f"{row.replicate_auroc_mean:.3f} ± {row.replicate_auroc_sd:.3f} | {row.auprc:.3f} | "
            f"{row.replicate_auprc_mean:.3f} ± {row.replicate_auprc_sd:.3f} | {row.replicate_aurocs} | {against} |"
        )
    return lines


def _peer_or_best(table: pd.DataFrame, row) -> tuple[str, float] | None:
    """The baseline a model's replicates are set against: its peer (`peer_baseline`) where the table names one,
    else the cell line's best baseline; with its AUROC."""
    peer = getattr(row, "peer_baseline", None)
    if isinstance(peer, str):
        return best_baseline(table, row.cell_line, [peer])
    return best_baseline(table, row.cell_line)


def within_distance_markdown(table: pd.DataFrame) -> list[str]:
    """The summary.md section on pairs of similar distance: matched AUROC and its difference with distance alone."""
    if "matched_auroc" not in table or table["matched_auroc"].isna().all():
        return []
    lines = [
        "",
        "## Within distance: each positive against negatives of similar distance",
        "",
        "Matched AUROC: (positive, negative) pairs of the same distance stratum only (evaluation.distance). "
        "Read against two references: chance (0.5: its 95% interval above it, the model ranks pairs of one "
        f"distance), and the {REFERENCE} baseline's own matched AUROC, which strays from 0.5 by the distance "
        "left within a stratum (Δ = the difference, paired bootstrap 95% interval). A model whose overall gain "
        "over distance vanishes here has learned distance; one above distance's but not above 0.5 has not "
        "shown that it ranks pairs of one distance.",
        "",
        "| cell line | model | AUROC | matched AUROC [95% CI] | above chance "
        "| Δ vs distance's [95% CI] | beyond distance's |",
        "|---|---|---|---|---|---|---|",
    ]
    column = f"matched_auroc_diff_{REFERENCE}"
    for row in table.itertuples():
        if pd.isna(row.matched_auroc):
            continue
        name = row.model if row.kind == "transformer" else f"{row.model} (baseline)"
        difference = getattr(row, column)
        low, high = getattr(row, f"{column}_lo"), getattr(row, f"{column}_hi")
        delta = "" if pd.isna(difference) else difference_text(difference, low, high)
        lines.append(
            f"| {row.cell_line} | {name} | {row.auroc:.3f} | {row.matched_auroc:.3f} "
            f"[{row.matched_auroc_lo:.3f}, {row.matched_auroc_hi:.3f}] | "
            f"{_chance_verdict(row.matched_auroc_lo, row.matched_auroc_hi)} | {delta} | {_within_verdict(low, high)} |"
        )
    return lines


def _chance_verdict(low: float, high: float) -> str:
    return interval_verdict(low, high, 0.5, "yes", "no: below", "not shown")


def interval_verdict(low: float, high: float, reference: float, above: str, below: str, neither: str) -> str:
    """`above` when a 95% interval [low, high] lies above `reference`, `below` when below it, else `neither`."""
    if low > reference:
        return above
    if high < reference:
        return below
    return neither


def _within_verdict(low: float, high: float) -> str:
    verdicts = ("yes: beyond distance", "no: below distance", "not shown: as distance")
    return "" if pd.isna(low) else interval_verdict(low, high, 0.0, *verdicts)


def dropped_markdown(table: pd.DataFrame) -> list[str]:
    """A line per cell line whose windows stage dropped pairs for their span: how many, of how many."""
    if "dropped_for_span" not in table or table["dropped_for_span"].fillna(0).eq(0).all():
        return []
    lines = [""]
    for row in table.drop_duplicates("cell_line").itertuples():
        if row.dropped_for_span and not pd.isna(row.dropped_for_span):
            lines.append(
                f"{row.cell_line}: {int(row.dropped_for_span):,} of {int(row.pairs_in):,} pairs dropped for their span "
                "(longer than windows.max_span, or across chromosomes), for every model and baseline alike; "
                f"{int(row.dropped_pairs):,} dropped in all (windows_stats.json)."
            )
    return lines


def paired_markdown(paired: pd.DataFrame) -> list[str]:
    """The summary.md section of `paired`: one line per (cell line, model, baseline), Δ = model − baseline."""
    resamples, seed = paired["resamples"].iloc[0], paired["seed"].iloc[0]
    lines = [
        "## Transformer minus baseline, on the same test pairs",
        "",
        f"Δ = model − baseline; [95% interval] from {resamples} paired bootstrap resamples (seed {seed}) that "
        "draw the test pairs once for both. An interval that excludes 0 shows a difference; "
        "overlapping per-model intervals do not show its absence.",
        "",
        "| cell line | model vs baseline | Δ AUROC [95% CI] | excludes 0 | Δ AUPRC [95% CI] | excludes 0 |",
        "|---|---|---|---|---|---|",
    ]
    paired = with_reference(paired)
    by_metric = paired.set_index(["cell_line", "model", "baseline", "metric"])
    baselines = paired[paired["reference"] == "baseline"]
    for cell, model, baseline in dict.fromkeys(zip(baselines["cell_line"], baselines["model"], baselines["baseline"])):
        cells = []
        for metric in PAIRED_METRIC_NAMES:
            row = by_metric.loc[(cell, model, baseline, metric)]
            cells += [difference_text(row.difference, row.lo, row.hi), _verdict(row.lo, row.hi)]
        lines.append(f"| {cell} | {model} vs {baseline} | " + " | ".join(cells) + " |")
    return lines + length_control_markdown(paired)


def with_reference(paired: pd.DataFrame) -> pd.DataFrame:
    """A paired table with its `reference` column; a table written before controls existed compares baselines only."""
    return paired if "reference" in paired else paired.assign(reference="baseline")


def length_control_markdown(paired: pd.DataFrame) -> list[str]:
    """The summary.md section of span models against their length controls: what the between-sequence gives."""
    controls = paired[(paired["reference"] == "length_control") & (paired["metric"] == "auroc")]
    if controls.empty:
        return []
    lines = [
        "",
        "## Span models against their length control",
        "",
        "A span's length is its distance. Each span model's length control reads the same spans with the bases "
        "between the elements shuffled (same length, N runs, composition and elements): Δ = span model − control, "
        "on the same test pairs, paired bootstrap 95% interval. The between-sequence gives something only where "
        "the interval lies above 0.",
        "",
        "| cell line | span model | AUROC | its length control | control AUROC | Δ AUROC [95% CI] "
        "| gain beyond length |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in controls.itertuples():
        verdict = "yes" if row.lo > 0 else ("no: the control is better" if row.hi < 0 else "no (within the interval)")
        lines.append(
            f"| {row.cell_line} | {row.model} | {row.model_value:.3f} | {row.baseline} | {row.baseline_value:.3f} | "
            f"{difference_text(row.difference, row.lo, row.hi)} | {verdict} |"
        )
    return lines


def _verdict(low: float, high: float) -> str:
    return interval_verdict(low, high, 0.0, "yes: model better", "yes: baseline better", "no")


def difference_text(value, low, high) -> str:
    """A difference and its interval as "+0.030 [+0.010, +0.050]" (every page and summary.md write them so); a dash
    where there is none."""
    if any(pd.isna(number) for number in (value, low, high)):
        return "–"
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"


def _number(value, spec: str = ".3f") -> str:
    return "" if value is None or pd.isna(value) else format(value, spec)
