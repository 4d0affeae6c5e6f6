"""Fixed-width windows around each element, and the train/validation/test split.

Window rule (0-based, half-open): for an element [s, e) and width W,
`center = (s + e) // 2`, `start = center - W // 2`, `end = start + W`, so the window's own
centre, `(start + end) // 2`, is `center`: a 1-bp TSS [t, t + 1) gets a window whose centre
is t, the TSS's base at offset W // 2 of it (ENCODE-rE2G's CRISPR benchmark: the promoter
window is centred on the TSS, the enhancer window on the element). A window that crosses
a chromosome end is shifted inside it (`edge="shift"`) or its pair dropped
(`edge="drop"`); a chromosome shorter than W always drops the pair. Every dropped pair is
counted by reason (and `WindowStats.dropped_ids` lists their pair ids); nothing is lost
silently.

Pairs whose enhancer or promoter window is more than `max_n_fraction` N are dropped too.
With `max_span` set (the workflow sets it when some model of the run reads spans), pairs
across chromosomes (no span) and pairs whose span, from the first window's start to the
second window's end, is longer than `max_span` bp are dropped as well, for every model and
baseline alike, so that all are scored on the same pairs.

`windows.tsv` columns: pair_id, label, split, distance, enhancer_chrom, enhancer_start,
enhancer_end, promoter_chrom, promoter_start, promoter_end (window coordinates; distance is
|enhancer centre - promoter centre| of the windows, -1 for pairs across chromosomes).
`windows_stats.json`: pairs in, kept, dropped by reason, split mode, pairs and positives
per split, and the window settings (`windows`: the WindowSpec), which travel on through the
shard manifest into model.json so that scoring new pairs places windows the same way.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import ELEMENTS, WINDOW_FIELDS
from epiformer.data.chromosomes import check_pairs_fit_genome
from epiformer.data.genome import Genome
from epiformer.data.pairs import fail_at_first_bad_row, read_pairs
from epiformer.data.splits import SplitSpec, assign_splits, split_audit
from epiformer.io.files import atomic_write_text
from epiformer.io.model_description import reads_spans
from epiformer.io.provenance import input_record, package_versions
from epiformer.io.windows_stats import write_windows_stats

log = logging.getLogger(__name__)
WINDOW_COLUMNS = ["pair_id", "label", "split", "distance"] + [
    f"{element}_{part}" for element in ELEMENTS for part in WINDOW_FIELDS
]


@dataclass(frozen=True)
class WindowSpec:
    """Where each element's window lies, and which pairs the windows stage keeps (the `windows:` config block)."""

    enhancer_width: int = 3000
    promoter_width: int = 2000
    edge: str = "shift"  # a window past a chromosome end: shifted inside it ("shift") or its pair dropped ("drop")
    allow_trans: bool = False  # keep pairs whose elements lie on different chromosomes
    max_n_fraction: float = 0.5  # drop pairs whose enhancer or promoter window is more than this fraction N
    # None: no model reads spans, no pair is dropped for its span. Set: pairs without a span (across
    # chromosomes) or with one longer than this (first window start to second window end, bp) are dropped.
    max_span: int | None = None
    # The CRISPR benchmark's TSSs from this annotation (a BED of windows around each gene's TSS named by gene
    # symbol; data.pairs) instead of its table's; empty: the table's. Other pair formats ignore it.
    tss_annotation: str = ""

    def __post_init__(self):
        shortest = self.enhancer_width + self.promoter_width
        if self.max_span is not None and self.max_span < shortest:
            raise ValueError(
                f"windows.max_span ({self.max_span:,} bp) is shorter than the two windows a span holds "
                f"(enhancer_width {self.enhancer_width} + promoter_width {self.promoter_width} = {shortest:,} bp): "
                "it would drop every pair whose windows do not overlap. Raise windows.max_span."
            )

    def width(self, element: str) -> int:
        return self.enhancer_width if element == "enhancer" else self.promoter_width


@dataclass
class WindowStats:
    """What the windows stage kept and dropped: pairs in, and the pairs dropped by reason (counts and ids)."""

    pairs_in: int = 0
    dropped: Counter = field(default_factory=Counter)
    dropped_ids: dict[str, np.ndarray] = field(default_factory=dict)  # reason -> pair ids, int64 [n]

    def as_dict(self, windows: pd.DataFrame, split: SplitSpec) -> dict:
        counts = windows.groupby("split")["label"].agg(["size", "sum"])
        return {
            "pairs_in": self.pairs_in,
            "pairs_kept": int(len(windows)),
            "dropped": dict(self.dropped),
            "split": json.loads(json.dumps({**asdict(split), "leak_prone": split.leak_prone})),  # as JSON holds it
            "splits": {
                s: {"pairs": int(counts.loc[s, "size"]), "positives": int(counts.loc[s, "sum"])} for s in counts.index
            },
        }


def place_windows(starts, ends, width: int, chrom_sizes, edge: str) -> tuple[np.ndarray, np.ndarray]:
    """Window starts by the window rule of the module docstring, and which windows fit."""
    starts, ends, chrom_sizes = (np.asarray(x, dtype=np.int64) for x in (starts, ends, chrom_sizes))
    window_starts = (starts + ends) // 2 - width // 2
    fits = chrom_sizes >= width
    if edge == "shift":
        window_starts = np.clip(window_starts, 0, np.maximum(chrom_sizes - width, 0))
    elif edge == "drop":
        fits &= (window_starts >= 0) & (window_starts + width <= chrom_sizes)
    else:
        raise ValueError(f"windows.edge must be 'shift' or 'drop', not {edge!r}")
    return window_starts, fits


def make_windows(
    pairs: pd.DataFrame,
    sizes: dict[str, int],
    spec: WindowSpec,
    genome: Genome | None = None,
    drop_duplicates: bool = True,
    trans_pairs: str = "fail",
) -> tuple[pd.DataFrame, WindowStats]:
    """Windows for every pair that fits; the stats count the pairs dropped, by reason.

    Rows read_pairs set aside (`pairs.attrs["dropped_on_read"]`) count as pairs in, dropped
    by their reason. With `genome`, pairs whose enhancer or promoter window is more than
    `spec.max_n_fraction` N are dropped as well. Exact duplicate rows are dropped for
    training; scoring keeps them (`drop_duplicates=False`) so every input row gets a score.
    Pairs across chromosomes, unless `spec.allow_trans`, fail at the first one
    (`trans_pairs="fail"`) or are dropped as `trans_pair` (`"drop"`, for scoring).
    """
    check_pairs_fit_genome(pairs, sizes, f"genome {genome.path}" if genome is not None else "the genome")
    set_aside = pairs.attrs.get("dropped_on_read", {})  # rows read_pairs could not centre a window on
    stats = WindowStats(pairs_in=len(pairs) + sum(len(ids) for ids in set_aside.values()))
    for reason, ids in set_aside.items():
        stats.dropped[reason] = len(ids)
        stats.dropped_ids[reason] = np.asarray(ids, dtype=np.int64)
    if drop_duplicates:
        duplicated = pairs.duplicated(subset=[c for c in pairs.columns if c != "pair_id"])
    else:
        duplicated = pd.Series(False, index=pairs.index)
    stats.dropped["duplicate_row"] = int(duplicated.sum())
    stats.dropped_ids["duplicate_row"] = pairs["pair_id"].to_numpy()[duplicated.to_numpy()]
    if duplicated.any():
        log.info("Dropped %d exact duplicate rows", int(duplicated.sum()))
    pairs = pairs[~duplicated]
    trans = (pairs["enhancer_chrom"] != pairs["promoter_chrom"]).to_numpy()
    if not spec.allow_trans and trans_pairs == "drop":
        stats.dropped["trans_pair"] = int(trans.sum())
        stats.dropped_ids["trans_pair"] = pairs["pair_id"].to_numpy()[trans]
        pairs, trans = pairs[~trans], trans[~trans]
    elif not spec.allow_trans:
        fail_at_first_bad_row(
            pairs,
            trans,
            lambda row: (
                f"the enhancer ({pairs['enhancer_chrom'].iloc[row]}) and promoter "
                f"({pairs['promoter_chrom'].iloc[row]}) lie on different chromosomes. "
                "Remove such pairs or set windows.allow_trans: true."
            ),
        )
    out = pd.DataFrame({"pair_id": pairs["pair_id"].to_numpy(), "label": pairs["label"].to_numpy()})
    keep = np.ones(len(pairs), dtype=bool)
    for element in ELEMENTS:
        chroms = pairs[f"{element}_chrom"].to_numpy()
        chrom_sizes = pd.Series(chroms).map(sizes).to_numpy()
        starts, fits = place_windows(
            pairs[f"{element}_start"], pairs[f"{element}_end"], spec.width(element), chrom_sizes, spec.edge
        )
        stats.dropped[f"{element}_window_off_chromosome"] = int((keep & ~fits).sum())
        stats.dropped_ids[f"{element}_window_off_chromosome"] = out["pair_id"].to_numpy()[keep & ~fits]
        keep &= fits
        out[f"{element}_chrom"], out[f"{element}_start"], out[f"{element}_end"] = (
            chroms,
            starts,
            starts + spec.width(element),
        )
    if genome is not None:
        for element in ELEMENTS:
            too_many_n = np.zeros(len(out), dtype=bool)
            too_many_n[keep] = n_fraction(genome, out[keep], element) > spec.max_n_fraction
            stats.dropped[f"{element}_window_mostly_n"] = int(too_many_n.sum())
            stats.dropped_ids[f"{element}_window_mostly_n"] = out["pair_id"].to_numpy()[too_many_n]
            keep &= ~too_many_n
    if spec.max_span is not None:
        keep &= ~_drop_unreadable_spans(out, trans, keep, spec.max_span, stats)
    centers = {e: (out[f"{e}_start"] + out[f"{e}_end"]) // 2 for e in ELEMENTS}
    out["distance"] = (centers["enhancer"] - centers["promoter"]).abs().where(~trans, -1)
    out["split"] = ""
    return out[keep].reset_index(drop=True)[WINDOW_COLUMNS], stats


def _drop_unreadable_spans(out: pd.DataFrame, trans: np.ndarray, keep: np.ndarray, max_span: int, stats) -> np.ndarray:
    """Pairs (among `keep`) without a span (across chromosomes) or with one over `max_span`, counted by reason."""
    starts = np.minimum(out["enhancer_start"], out["promoter_start"]).to_numpy()
    span = np.maximum(out["enhancer_end"], out["promoter_end"]).to_numpy() - starts
    reasons = {"span_across_chromosomes": keep & trans, "span_longer_than_max_span": keep & ~trans & (span > max_span)}
    for reason, dropped in reasons.items():
        stats.dropped[reason] = int(dropped.sum())
        stats.dropped_ids[reason] = out["pair_id"].to_numpy()[dropped]
        if dropped.any():
            log.info("Dropped %d pairs: %s (windows.max_span %d)", int(dropped.sum()), reason, max_span)
    return reasons["span_across_chromosomes"] | reasons["span_longer_than_max_span"]


def window_spec_for(
    description: dict, edge: str | None = None, max_n_fraction: float | None = None, allow_trans: bool | None = None
) -> WindowSpec:
    """The WindowSpec to place new pairs' windows for a trained model: model.json's `windows`; given values override.

    An element model reads element windows, whatever else its training run read: a run that
    also trained span models dropped pairs without a span (`max_span`), which must not drop
    pairs here. A span model keeps its `max_span`: a span longer than any it was trained on,
    or none (across chromosomes), is left unscored.
    """
    trained = dict(description["windows"])
    settings = {**trained, "max_span": trained.get("max_span") if reads_spans(description) else None}
    for key, value in {"edge": edge, "max_n_fraction": max_n_fraction, "allow_trans": allow_trans}.items():
        if value is None:
            continue
        if value != trained.get(key):
            log.warning("Scoring with %s=%s; the model was trained with %s=%s.", key, value, key, trained.get(key))
        settings[key] = value
    return WindowSpec(**settings)


def place_pair_windows(pairs: pd.DataFrame, genome: Genome, spec: WindowSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Windows of every scorable new pair (windows.tsv columns) and the pairs left unscored, with reasons.

    As the windows stage places them, except that nothing is dropped as a duplicate (every
    input row gets a score) and pairs across chromosomes, for a model trained without
    `allow_trans`, are left unscored (`trans_pair`) instead of failing the run.
    """
    windows, stats = make_windows(pairs, genome.sizes, spec, genome, drop_duplicates=False, trans_pairs="drop")
    rows = [pd.DataFrame({"pair_id": ids, "reason": reason}) for reason, ids in stats.dropped_ids.items() if len(ids)]
    table = pd.concat(rows) if rows else pd.DataFrame({"pair_id": np.zeros(0, np.int64), "reason": ""})
    return windows, table


def n_fraction(genome: Genome, windows: pd.DataFrame, element: str, chunk: int = 20_000) -> np.ndarray:
    """Fraction of N bases in each window of `element`, read in chunks to bound memory."""
    fractions = []
    for offset in range(0, len(windows), chunk):
        part = windows.iloc[offset : offset + chunk]
        codes = genome.fetch_many(part[f"{element}_chrom"].tolist(), part[f"{element}_start"], part[f"{element}_end"])
        fractions.append((codes == ord("N")).mean(axis=1))
    return np.concatenate(fractions) if fractions else np.zeros(0)


def build_windows(
    pairs_path, genome_path, window_spec: WindowSpec, split_spec: SplitSpec, windows_path, audit_path, stats_path
) -> dict:
    """The whole windows stage: read and check pairs, place windows, split, audit, write.

    Outputs are written only once everything has succeeded, each atomically, so a bad
    input leaves no output behind. Returns what windows_stats.json holds.
    """
    pairs = read_pairs(pairs_path, tss_annotation=window_spec.tss_annotation)
    log.info("Read %d pairs (%s) from %s", len(pairs), pairs.attrs["format"], pairs_path)
    with Genome(genome_path) as genome:
        windows, stats = make_windows(pairs, genome.sizes, window_spec, genome)
    windows = assign_splits(windows, split_spec, dict(stats.dropped))
    summary = {
        **stats.as_dict(windows, split_spec),
        "windows": asdict(window_spec),
        "inputs": input_record(pairs_path, genome_path),
        "versions": package_versions(),
    }
    log.info("Windows: %s", json.dumps(summary))
    if split_spec.leak_prone:
        log.warning("split.mode is random: pairs share elements across splits, so results are leak-prone.")
    audit = split_audit(windows, temp_dir=str(Path(windows_path).parent))
    log.info("Split audit:\n%s", audit.to_string(index=False))
    atomic_write_text(windows_path, windows.to_csv(sep="\t", index=False))
    atomic_write_text(audit_path, audit.to_csv(sep="\t", index=False))
    write_windows_stats(stats_path, summary)
    return summary
