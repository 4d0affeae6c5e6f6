"""Verdicts: a model against a baseline, from the replicates' spread and the paired interval, computed, never typed.

`spread_verdict` reads only the replicates (every one above a baseline's AUROC, every one below,
or the baseline within their spread); `peer_verdict` reads both the paired interval of the AUROC
difference and the spread: "above" or "below" only when both say so. A model's peer baseline
(`peer_baseline`) is the strongest that reads nothing it does not, fitted either way.
summary.tsv's peer columns and replicate columns come from here; the results pages' tables
(docs/results/write_tables.py) use the same functions. Torch-free.
"""

from __future__ import annotations

import pandas as pd

REPLICATE_DIGITS = 4  # decimals of each replicate's AUROC and AUPRC in summary.tsv (the verdicts compare at it)


def replicate_values(row, metric: str = "auroc") -> list[float]:
    """Each replicate's AUROC (or AUPRC) of a summary row, from its `replicate_{metric}s` column; [] for a baseline."""
    text = getattr(row, f"replicate_{metric}s", None)  # a namedtuple of itertuples() or a Series
    return [] if text is None or pd.isna(text) else [float(value) for value in str(text).split(";")]


def best_baseline(table: pd.DataFrame, cell_line: str, names: list[str] | None = None) -> tuple[str, float] | None:
    """The cell line's best baseline by test AUROC (of `names`, default all) and its AUROC, or None without one
    (none of them run, or none scored)."""
    rows = table[(table["cell_line"] == cell_line) & (table["kind"] == "baseline")]
    if names is not None:
        rows = rows[rows["model"].isin(names)]
    rows = rows.dropna(subset=["auroc"])  # a baseline that could not be scored (one class) is no bar
    if rows.empty:
        return None
    best = rows.loc[rows["auroc"].idxmax()]
    return str(best["model"]), float(best["auroc"])


def spread_verdict(replicates: list[float], bar: float) -> str:
    """Where a model's replicates lie against a baseline's AUROC `bar`: every replicate above it, every one below
    it, or the bar within their spread.

    Only "every replicate above" or "below" says the model differs from the baseline beyond
    what a seed changes; "within the spread" says a retrained model could land on either side.
    The bar is compared at the precision the replicates are stored at (REPLICATE_DIGITS), so
    a tie is a tie. Empty for fewer than two replicates, which have no spread.
    """
    if len(replicates) < 2:
        return ""
    bar = round(bar, REPLICATE_DIGITS)
    if min(replicates) > bar:
        return "every replicate above"
    if max(replicates) < bar:
        return "every replicate below"
    return "within the spread"


def peer_baseline(table: pd.DataFrame, row) -> str | None:
    """A model's peer: the strongest by test AUROC of its cell line's baselines that read nothing the model does not,
    fitted either way (pooled or per cell line). A model given distance meets distance alone too, and a pooled model
    a per-cell-line baseline, where those score higher: the bar a referee sets (issue 39), since a model that reads
    more should beat every baseline that reads less. None for a baseline row, or without one."""
    if row["kind"] != "transformer":
        return None
    baselines = table[(table["cell_line"] == row["cell_line"]) & (table["kind"] == "baseline")].dropna(subset=["auroc"])
    model_reads = set(row["reads"].split("+"))
    baselines = baselines[[set(text.split("+")) <= model_reads for text in baselines["reads"]]]
    if baselines.empty:
        return None
    return str(baselines.loc[baselines["auroc"].idxmax(), "model"])


def peer_verdict(table: pd.DataFrame, row, peer: str | None) -> str | None:
    """A model against its peer baseline, from the paired interval of their AUROC difference and, for replicates,
    their spread: "above" or "below" only when the interval excludes 0 and every replicate lies on that side;
    otherwise "tie: interval" (it holds 0), "tie: replicates" (the peer lies within their spread) or "no interval"
    (no resample held both classes)."""
    if peer is None:
        return None
    low, high = row[f"auroc_diff_{peer}_lo"], row[f"auroc_diff_{peer}_hi"]
    if pd.isna(low) or pd.isna(high):
        return "no interval"
    bar = table.loc[(table["cell_line"] == row["cell_line"]) & (table["model"] == peer), "auroc"].iloc[0]
    spread = spread_verdict(replicate_values(row), bar)
    for side, excludes in (("above", low > 0), ("below", high < 0)):
        if excludes:
            return side if spread in ("", f"every replicate {side}") else "tie: replicates"
    return "tie: interval"


PEER_COLUMNS = ["peer_baseline", "peer_verdict"]


def with_peer_columns(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with PEER_COLUMNS: each model's peer baseline (`peer_baseline`) and its verdict against it
    (`peer_verdict`); empty on baseline rows."""
    peers = [peer_baseline(table, row) for _, row in table.iterrows()]
    verdicts = [peer_verdict(table, row, peer) for (_, row), peer in zip(table.iterrows(), peers)]
    return table.assign(peer_baseline=peers, peer_verdict=verdicts)
