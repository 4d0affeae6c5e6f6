"""Train/validation/test splits and the audit that shows whether they share sequence.

`chromosome` mode (default) puts a pair in test when its enhancer lies on a test
chromosome, in validation when on a validation chromosome, else in train: no window can be
shared across splits. `random` mode (seeded, stratified by label) exists to compare with
published numbers; pairs share elements across splits there, so its results are
leak-prone, and every output of such a run says so.

`split_audit.tsv`, one row per pair of splits: split_a, split_b, windows_a, windows_b,
overlapping_windows (windows of split_a that overlap any window of split_b, by `bedtools
intersect -u`), shared_elements (identical enhancer or promoter windows present in both).
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

from epiformer.constants import ELEMENTS, SPLITS

AUDIT_COLUMNS = ["split_a", "split_b", "windows_a", "windows_b", "overlapping_windows", "shared_elements"]


class SplitError(ValueError):
    """A split that cannot be used: no pairs, or only one class."""


@dataclass(frozen=True)
class SplitSpec:
    mode: str = "chromosome"
    val_chromosomes: tuple[str, ...] = ()
    test_chromosomes: tuple[str, ...] = ()
    val_fraction: float = 0.1
    test_fraction: float = 0.2
    seed: int = 0

    @classmethod
    def from_config(cls, split: dict) -> SplitSpec:
        return cls(
            **{
                **split,
                "val_chromosomes": tuple(split.get("val_chromosomes", ())),
                "test_chromosomes": tuple(split.get("test_chromosomes", ())),
            }
        )

    @property
    def leak_prone(self) -> bool:
        return self.mode == "random"


def assign_splits(windows: pd.DataFrame, spec: SplitSpec) -> pd.DataFrame:
    """Fill the `split` column; chromosome mode splits on the enhancer's chromosome."""
    windows = windows.copy()
    if spec.mode == "chromosome":
        overlap = set(spec.val_chromosomes) & set(spec.test_chromosomes)
        if overlap:
            raise SplitError(f"split: {sorted(overlap)} listed as both validation and test chromosomes")
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
        raise SplitError(f"split.mode must be 'chromosome' or 'random', not {spec.mode!r}")
    check_splits_have_both_labels(windows, spec)
    return windows


def check_splits_have_both_labels(windows: pd.DataFrame, spec: SplitSpec) -> None:
    chromosomes = {"val": spec.val_chromosomes, "test": spec.test_chromosomes, "train": ("all others",)}
    for split in SPLITS:
        labels = set(windows.loc[windows["split"] == split, "label"])
        if not {0, 1} <= labels:
            where = f" (chromosomes {', '.join(chromosomes[split])})" if spec.mode == "chromosome" else ""
            problem = "no pairs" if not labels else ("no positives" if 1 not in labels else "no negatives")
            raise SplitError(
                f"The {split} split{where} has {problem}. Choose split chromosomes that hold both "
                "interacting and non-interacting pairs (split.val_chromosomes / split.test_chromosomes)."
            )


def element_windows(windows: pd.DataFrame) -> pd.DataFrame:
    """Distinct enhancer and promoter windows of a set of pairs, as BED columns."""
    parts = [
        windows[[f"{e}_chrom", f"{e}_start", f"{e}_end"]].set_axis(["chrom", "start", "end"], axis=1) for e in ELEMENTS
    ]
    return pd.concat(parts).drop_duplicates().sort_values(["chrom", "start", "end"]).reset_index(drop=True)


def split_audit(windows: pd.DataFrame, temp_dir: str | None = None) -> pd.DataFrame:
    """Overlapping windows and shared elements for each pair of splits (see module docstring)."""
    import pybedtools

    elements = {split: element_windows(windows[windows["split"] == split]) for split in SPLITS}
    previous_tempdir = tempfile.tempdir  # pybedtools.set_tempdir changes it for the whole process
    rows = []
    try:
        with tempfile.TemporaryDirectory(dir=temp_dir) as scratch:
            pybedtools.set_tempdir(scratch)  # pybedtools otherwise fills the system temp folder
            beds = {s: pybedtools.BedTool.from_dataframe(frame) for s, frame in elements.items() if len(frame)}
            for first, second in itertools.combinations(SPLITS, 2):
                a, b = elements[first], elements[second]
                overlapping = beds[first].intersect(beds[second], u=True).count() if len(a) and len(b) else 0
                shared = len(a.merge(b, on=["chrom", "start", "end"]))
                rows.append([first, second, len(a), len(b), overlapping, shared])
            pybedtools.cleanup()
    finally:
        tempfile.tempdir = previous_tempdir
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)
