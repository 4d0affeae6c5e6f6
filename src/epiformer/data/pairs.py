"""Candidate enhancer-promoter pair tables: TargetFinder CSV and BEDPE.

Both are read into one frame with the columns of `PAIR_COLUMNS` plus any extra columns the
file had. Coordinates are 0-based, half-open (BED). `pair_id` is the 0-based index of the
pair among the file's data rows and follows the pair through every output.

- TargetFinder CSV: a header with at least enhancer_chrom, enhancer_start, enhancer_end,
  promoter_chrom, promoter_start, promoter_end and (for training) label.
- BEDPE: tab-separated, no header or a `#` header line: chrom1 start1 end1 chrom2 start2
  end2 name score strand1 strand2 label; interval 1 is the enhancer, interval 2 the promoter.

The format is detected from the content; `.gz` files are read transparently.

Training needs a 0/1 label for every pair (`require_label=True`). For scoring new pairs
labels are optional (`require_label=False`): a missing label column, or any value other
than 0/1 (blank, `.`, `NA`), reads as -1, unknown.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import ELEMENTS, WINDOW_FIELDS

ELEMENT_COLUMNS = [f"{element}_{field}" for element in ELEMENTS for field in WINDOW_FIELDS]
PAIR_COLUMNS = ["pair_id", *ELEMENT_COLUMNS, "label"]
BEDPE_COLUMNS = ["chrom1", "start1", "end1", "chrom2", "start2", "end2", "name", "score", "strand1", "strand2", "label"]
BEDPE_TO_PAIR = dict(zip(BEDPE_COLUMNS[:6], ELEMENT_COLUMNS))


class PairsError(ValueError):
    """A problem in a pairs file, reported with the file, line and fix."""


def _open_text(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def detect_format(path: Path) -> str:
    """`targetfinder` or `bedpe`, from the file's first non-empty line (a TargetFinder header, or BEDPE columns)."""
    with _open_text(path) as handle:
        for line in handle:
            if line.strip():
                first = line.lstrip("#").strip()
                break
        else:
            raise PairsError(
                f"{path}: the file is empty. Give a TargetFinder CSV or BEDPE file with at least one pair."
            )
    if "\t" not in first and len(first.split(",")) >= 6:
        return "targetfinder"  # any CSV is read as TargetFinder; missing columns are named there
    if len(first.split("\t")) >= 6:
        return "bedpe"
    raise PairsError(
        f"{path}, line 1: cannot tell the format from {first[:80]!r}. Expected a TargetFinder CSV header "
        "(enhancer_chrom,enhancer_start,...) or tab-separated BEDPE (chrom1 start1 end1 chrom2 start2 end2 ...)."
    )


def read_pairs(path: str | Path, require_label: bool = True) -> pd.DataFrame:
    """Read and check a pairs file; returns PAIR_COLUMNS first, extra columns after.

    `header_lines` (the number of lines before the first data row) is stored in
    `frame.attrs` so that later checks can name 1-based file lines.
    """
    path = Path(path)
    if not path.exists():
        raise PairsError(f"Pairs file not found: {path}. Check the `pairs` column of the sample sheet.")
    fmt = detect_format(path)
    frame, header_lines = _read_targetfinder(path) if fmt == "targetfinder" else _read_bedpe(path)
    if frame.empty:
        raise PairsError(f"{path}: the table has a header but no pairs. Add at least one data row.")
    frame.attrs.update(path=str(path), format=fmt, header_lines=header_lines)
    if "label" not in frame.columns:
        if require_label:
            raise PairsError(f"{path}: no `label` column. Add a 0/1 label for each pair (1 = interacts).")
        frame["label"] = -1
    frame.insert(0, "pair_id", range(len(frame)))
    _check_values(frame, require_label)
    extras = [c for c in frame.columns if c not in PAIR_COLUMNS]
    return frame[PAIR_COLUMNS + extras]


def _read_targetfinder(path: Path) -> tuple[pd.DataFrame, int]:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, compression="infer")
    missing = [c for c in ELEMENT_COLUMNS if c not in frame.columns]
    if missing:
        raise PairsError(f"{path}, line 1: missing column(s) {', '.join(missing)}. Add them to the header.")
    return frame, 1


def _read_bedpe(path: Path) -> tuple[pd.DataFrame, int]:
    with _open_text(path) as handle:
        header_lines = 0
        for line in handle:
            if not line.startswith("#"):
                break
            header_lines += 1
    frame = pd.read_csv(
        path, sep="\t", header=None, comment=None, skiprows=header_lines, dtype=str, keep_default_na=False
    )
    if frame.shape[1] < 6:
        raise PairsError(f"{path}, line {header_lines + 1}: BEDPE needs at least 6 tab-separated columns.")
    names = BEDPE_COLUMNS[: frame.shape[1]] + [f"extra{i}" for i in range(frame.shape[1] - len(BEDPE_COLUMNS))]
    frame.columns = names
    return frame.rename(columns=BEDPE_TO_PAIR), header_lines


def file_line(frame: pd.DataFrame, row: int) -> str:
    """'file, line N' for row `row` of a frame from read_pairs, also after rows were dropped from it.

    N is the 1-based file line, found from the row's `pair_id` (its 0-based data row in the
    file); for a table whose rows are in file order and whose `pair_id` is a value read from
    the file (a scores table, `attrs["rows_in_file_order"]`), from the row's position.
    """
    by_position = "pair_id" not in frame or frame.attrs.get("rows_in_file_order", False)
    data_row = row if by_position else int(frame["pair_id"].iloc[row])
    return f"{frame.attrs.get('path', 'pairs')}, line {frame.attrs.get('header_lines', 1) + data_row + 1}"


def _check_values(frame: pd.DataFrame, require_label: bool) -> None:
    for column in [c for c in ELEMENT_COLUMNS if not c.endswith("chrom")]:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        bad = numbers.isna() | (numbers < 0) | (numbers != numbers.round())
        fail_at_first_bad_value(frame, bad, column, "a non-negative integer (0-based, BED)")
        frame[column] = numbers.astype("int64")
    for element in ELEMENTS:
        bad = frame[f"{element}_start"] >= frame[f"{element}_end"]
        fail_at_first_bad_value(frame, bad, f"{element}_start", f"below {element}_end")
    if require_label:
        bad = ~frame["label"].astype(str).str.strip().isin(["0", "1"])
        fail_at_first_bad_value(frame, bad, "label", "0 or 1")
        frame["label"] = pd.to_numeric(frame["label"]).astype("int64")
    else:
        frame["label"] = frame["label"].astype(str).str.strip().map({"0": 0, "1": 1}).fillna(-1).astype("int64")


def fail_at_first_bad_row(frame: pd.DataFrame, bad, problem, error: type[Exception] = PairsError) -> None:
    """Raise `error` naming the file line of the first row where `bad` holds, `problem(row)` and the count.

    `frame` comes from read_pairs (rows in file order); `problem` says what is wrong and how to fix it.
    """
    bad = np.asarray(bad, dtype=bool)
    if bad.any():
        row = int(bad.nonzero()[0][0])
        raise error(f"{file_line(frame, row)}: {problem(row)} ({int(bad.sum())} row(s) in all have this problem.)")


def fail_at_first_bad_value(
    frame: pd.DataFrame, bad, column: str, expected: str, error: type[Exception] = PairsError
) -> None:
    """fail_at_first_bad_row for a bad value: '`column` is `value`; it must be `expected`'."""

    def problem(row: int) -> str:
        value = frame[column].iloc[row]
        value = value.item() if hasattr(value, "item") else value  # numpy scalar -> plain for the message
        return f"{column} is {value!r}; it must be {expected}. Fix that row."

    fail_at_first_bad_row(frame, bad, problem, error)
