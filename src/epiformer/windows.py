"""Fixed-width windows around each element, and the train/validation/test split.

Window rule (0-based, half-open): for an element [s, e) and width W,
`center = (s + e) // 2`, `start = center - W // 2`, `end = start + W`. A window that crosses
a chromosome end is shifted inside it (`edge="shift"`) or its pair dropped
(`edge="drop"`); a chromosome shorter than W always drops the pair. Every dropped pair is
counted by reason; nothing is lost silently.

`windows.tsv` columns: pair_id, label, split, distance, enhancer_chrom, enhancer_start,
enhancer_end, promoter_chrom, promoter_start, promoter_end (window coordinates; distance is
|enhancer centre - promoter centre| of the windows).
"""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from epiformer.pairs import PairsError

WINDOW_COLUMNS = ["pair_id", "label", "split", "distance"] + [
    f"{element}_{part}" for element in ("enhancer", "promoter") for part in ("chrom", "start", "end")
]
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class SplitSpec:
    mode: str = "chromosome"
    val_chromosomes: tuple[str, ...] = ()
    test_chromosomes: tuple[str, ...] = ()
    val_fraction: float = 0.1
    test_fraction: float = 0.2
    seed: int = 0


@dataclass
class WindowReport:
    pairs_in: int = 0
    dropped: Counter = field(default_factory=Counter)

    def as_dict(self, windows: pd.DataFrame, split_mode: str) -> dict:
        counts = windows.groupby("split")["label"].agg(["size", "sum"])
        return {
            "pairs_in": self.pairs_in,
            "pairs_kept": int(len(windows)),
            "dropped": dict(self.dropped),
            "split_mode": split_mode,
            "leak_prone": split_mode == "random",
            "splits": {s: {"pairs": int(counts.loc[s, "size"]), "positives": int(counts.loc[s, "sum"])}
                       for s in counts.index},  # fmt: skip
        }


def check_chromosomes(pairs: pd.DataFrame, sizes: dict[str, int]) -> None:
    """Fail on the first chromosome the genome lacks, with a hint when only `chr` differs."""
    for column in ("enhancer_chrom", "promoter_chrom"):
        unknown = ~pairs[column].isin(list(sizes))
        if not unknown.any():
            continue
        row = int(unknown.to_numpy().nonzero()[0][0])
        name = pairs[column].iloc[row]
        flipped = name[3:] if name.startswith("chr") else f"chr{name}"
        hint = (
            f" The genome names it {flipped!r}: only the `chr` prefix differs; rename one side to match."
            if flipped in sizes
            else " Use a genome of the same build, or fix the name."
        )
        raise PairsError(
            f"{pairs.attrs.get('path', 'pairs')}, line {pairs.attrs.get('header_lines', 1) + row + 1}: "
            f"{column} {name!r} is not in the genome (it has {', '.join(list(sizes)[:5])}, ...).{hint}"
        )


def place_windows(starts, ends, width: int, chrom_sizes, edge: str) -> tuple[np.ndarray, np.ndarray]:
    """Window starts by the DESIGN rule, and which windows fit (see module docstring)."""
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
    enhancer_width: int,
    promoter_width: int,
    edge: str = "shift",
    allow_trans: bool = False,
) -> tuple[pd.DataFrame, WindowReport]:
    """Windows for every pair that fits; the report counts the pairs dropped, by reason."""
    check_chromosomes(pairs, sizes)
    report = WindowReport(pairs_in=len(pairs))
    duplicated = pairs.duplicated(subset=[c for c in pairs.columns if c != "pair_id"])
    report.dropped["duplicate_row"] = int(duplicated.sum())
    pairs = pairs[~duplicated]
    trans = pairs["enhancer_chrom"] != pairs["promoter_chrom"]
    if trans.any() and not allow_trans:
        row = int(trans.to_numpy().nonzero()[0][0])
        raise PairsError(
            f"{pairs.attrs.get('path', 'pairs')}, pair_id {pairs['pair_id'].iloc[row]}: the enhancer and promoter lie "
            f"on different chromosomes ({int(trans.sum())} such pairs). Remove them or set windows.allow_trans: true."
        )
    out = pd.DataFrame({"pair_id": pairs["pair_id"].to_numpy(), "label": pairs["label"].to_numpy()})
    keep = np.ones(len(pairs), dtype=bool)
    for element, width in (("enhancer", enhancer_width), ("promoter", promoter_width)):
        chroms = pairs[f"{element}_chrom"].to_numpy()
        starts, fits = place_windows(
            pairs[f"{element}_start"], pairs[f"{element}_end"], width, [sizes[c] for c in chroms], edge
        )
        report.dropped[f"{element}_window_off_chromosome"] = int((keep & ~fits).sum())
        keep &= fits
        out[f"{element}_chrom"], out[f"{element}_start"], out[f"{element}_end"] = chroms, starts, starts + width
    centers = {e: (out[f"{e}_start"] + out[f"{e}_end"]) // 2 for e in ("enhancer", "promoter")}
    out["distance"] = (centers["enhancer"] - centers["promoter"]).abs().where(~trans.to_numpy(), -1)
    out["split"] = ""
    return out[keep].reset_index(drop=True)[WINDOW_COLUMNS], report


def assign_splits(windows: pd.DataFrame, spec: SplitSpec) -> pd.DataFrame:
    """Fill the `split` column; chromosome mode splits on the enhancer's chromosome."""
    windows = windows.copy()
    if spec.mode == "chromosome":
        overlap = set(spec.val_chromosomes) & set(spec.test_chromosomes)
        if overlap:
            raise ValueError(f"split: {sorted(overlap)} listed as both validation and test chromosomes")
        chrom = windows["enhancer_chrom"]
        windows["split"] = np.where(
            chrom.isin(spec.test_chromosomes), "test", np.where(chrom.isin(spec.val_chromosomes), "val", "train")
        )
    elif spec.mode == "random":
        rng = np.random.default_rng(spec.seed)
        windows["split"] = "train"
        for _, group in windows.groupby("label"):  # stratified: each label split in the same fractions
            order = rng.permutation(group.index.to_numpy())
            n_test, n_val = round(len(order) * spec.test_fraction), round(len(order) * spec.val_fraction)
            windows.loc[order[:n_test], "split"] = "test"
            windows.loc[order[n_test : n_test + n_val], "split"] = "val"
    else:
        raise ValueError(f"split.mode must be 'chromosome' or 'random', not {spec.mode!r}")
    _check_splits_have_both_labels(windows, spec)
    return windows


def _check_splits_have_both_labels(windows: pd.DataFrame, spec: SplitSpec) -> None:
    chromosomes = {"val": spec.val_chromosomes, "test": spec.test_chromosomes, "train": ("all others",)}
    for split in SPLITS:
        labels = set(windows.loc[windows["split"] == split, "label"])
        if not {0, 1} <= labels:
            where = f" (chromosomes {', '.join(chromosomes[split])})" if spec.mode == "chromosome" else ""
            raise ValueError(
                f"The {split} split{where} has {'no pairs' if not labels else 'no positives or no negatives'}. "
                "Choose split chromosomes that hold both interacting and non-interacting pairs."
            )


def split_audit(windows: pd.DataFrame, temp_dir: str | None = None) -> pd.DataFrame:
    """For each pair of splits, how many windows of the first overlap any window of the second.

    Uses `bedtools intersect -u` through pybedtools on the real window coordinates.
    """
    import pybedtools

    previous_tempdir = tempfile.tempdir  # pybedtools.set_tempdir changes it for the whole process
    with tempfile.TemporaryDirectory(dir=temp_dir) as scratch:
        pybedtools.set_tempdir(scratch)  # pybedtools otherwise fills the system temp folder
        beds = {split: _split_bed(windows[windows["split"] == split], pybedtools) for split in SPLITS}
        rows = []
        for first, second in itertools.combinations(SPLITS, 2):
            a, b = beds[first], beds[second]
            overlapping = len(a.intersect(b, u=True)) if len(a) and len(b) else 0
            rows.append({"split_a": first, "split_b": second, "windows_a": len(a), "overlapping_windows_a": overlapping})
        pybedtools.cleanup()
        tempfile.tempdir = previous_tempdir
    return pd.DataFrame(rows)


def _split_bed(windows: pd.DataFrame, pybedtools):
    intervals = [
        (row[f"{e}_chrom"], int(row[f"{e}_start"]), int(row[f"{e}_end"]))
        for _, row in windows.iterrows()
        for e in ("enhancer", "promoter")
    ]
    return pybedtools.BedTool(sorted(set(intervals))).saveas()
