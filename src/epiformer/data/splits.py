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
from epiformer.data.chromosomes import flip_chr

AUDIT_COLUMNS = ["split_a", "split_b", "windows_a", "windows_b", "overlapping_windows", "shared_elements"]


class SplitError(ValueError):
    """A split that cannot be used: no pairs, or only one class."""


@dataclass(frozen=True)
class SplitSpec:
    """How pairs are split into train, validation and test (the `split:` config block)."""

    mode: str = "chromosome"  # "chromosome" (held-out chromosomes) or "random" (leak-prone)
    val_chromosomes: tuple[str, ...] = ()  # chromosome mode: a pair whose enhancer lies on one is validation
    test_chromosomes: tuple[str, ...] = ()  # chromosome mode: ... test
    val_fraction: float = 0.1  # random mode: the share of each label drawn for validation
    test_fraction: float = 0.2  # random mode: ... for test
    seed: int = 0  # random mode

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

    def check(self, chromosomes=None, genome_name: str = "the genome") -> None:
        """Fail, naming the key, on a split that would be empty or overlap; with the genome's `chromosomes`
        (names), on held-out chromosomes the genome lacks. The workflow calls it before any job runs."""
        if self.mode == "random":
            if self.val_fraction + self.test_fraction >= 1:
                raise SplitError(
                    f"split.val_fraction ({self.val_fraction}) + split.test_fraction ({self.test_fraction}) is 1 or "
                    "more: the train split would be empty. Lower them (e.g. 0.1 and 0.2)."
                )
            return
        for split in ("val", "test"):
            if not getattr(self, f"{split}_chromosomes"):
                raise SplitError(
                    f"split.{split}_chromosomes is empty: the {split} split would hold no pairs. List the chromosomes "
                    f"it holds out (e.g. [chr8]), or set split.mode: random."
                )
        overlap = sorted(set(self.val_chromosomes) & set(self.test_chromosomes))
        if overlap:
            raise SplitError(
                f"split: {', '.join(overlap)} is in both split.val_chromosomes and split.test_chromosomes; "
                "a held-out chromosome belongs to one split. Remove it from one list."
            )
        if chromosomes is not None:
            known = set(chromosomes)
            for split in ("val", "test"):
                missing = [name for name in getattr(self, f"{split}_chromosomes") if name not in known]
                if missing:
                    some = ", ".join(list(chromosomes)[:5]) + (", ..." if len(known) > 5 else "")
                    flipped = [flip_chr(name) for name in missing if flip_chr(name) in known]
                    hint = f" (the genome names it {flipped[0]})" if flipped else ""
                    raise SplitError(
                        f"split.{split}_chromosomes: {', '.join(missing)} is not a chromosome of {genome_name} "
                        f"(it has {some}): the {split} split would hold no pairs. Name the held-out chromosomes "
                        f"as the genome does{hint}."
                    )


def assign_splits(windows: pd.DataFrame, spec: SplitSpec, dropped: dict | None = None) -> pd.DataFrame:
    """Fill the `split` column; chromosome mode splits on the enhancer's chromosome.

    `dropped` (pairs dropped before, by reason) lets the error for an empty split name its cause.
    """
    spec.check()
    windows = windows.copy()
    if spec.mode == "chromosome":
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
    check_splits_have_both_labels(windows, spec, dropped)
    return windows


def check_splits_have_both_labels(windows: pd.DataFrame, spec: SplitSpec, dropped: dict | None = None) -> None:
    """Fail on a split without both classes, saying which setting to change: the split's, or what dropped pairs."""
    chromosomes = {"val": spec.val_chromosomes, "test": spec.test_chromosomes, "train": ("all others",)}
    for split in SPLITS:
        labels = set(windows.loc[windows["split"] == split, "label"])
        if {0, 1} <= labels:
            continue
        where = f" (chromosomes {', '.join(chromosomes[split])})" if spec.mode == "chromosome" else ""
        problem = "no pairs" if not labels else ("no positives" if 1 not in labels else "no negatives")
        raise SplitError(f"The {split} split{where} has {problem}. {_split_fix(split, spec, dropped or {})}")


def _split_fix(split: str, spec: SplitSpec, dropped: dict) -> str:
    """What to change for a split without both classes: the largest cause of dropped pairs, else the split."""
    causes = {reason: count for reason, count in dropped.items() if count}
    if causes:
        reason, count = max(causes.items(), key=lambda item: item[1])
        settings = {
            "span_longer_than_max_span": "raise windows.max_span",
            "span_across_chromosomes": "set allow_trans or drop those pairs",
            "enhancer_window_mostly_n": "raise windows.max_n_fraction",
            "promoter_window_mostly_n": "raise windows.max_n_fraction",
            "enhancer_window_off_chromosome": "set windows.edge: shift",
            "promoter_window_off_chromosome": "set windows.edge: shift",
        }
        more = f" ({settings[reason]})" if reason in settings else ""
        return (
            f"The windows stage dropped {sum(causes.values())} pairs, most for {reason} ({count}): if that "
            f"emptied it, change that setting{more}; windows_stats.json counts every reason."
        )
    if spec.mode == "random":
        if split == "train":
            return "Lower split.val_fraction and split.test_fraction, or give more pairs."
        return f"Raise split.{split}_fraction, or give more pairs."
    return (
        "Choose split chromosomes that hold both interacting and non-interacting pairs "
        "(split.val_chromosomes / split.test_chromosomes)."
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
