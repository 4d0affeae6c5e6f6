"""Candidate enhancer-promoter pair tables: TargetFinder CSV, BEDPE, and ENCODE-rE2G's CRISPR benchmark.

All are read into one frame with the columns of `PAIR_COLUMNS` plus any extra columns the
file had. Coordinates are 0-based, half-open (BED). `pair_id` is the 0-based index of the
pair among the file's data rows and follows the pair through every output.

- TargetFinder CSV: a header with at least enhancer_chrom, enhancer_start, enhancer_end,
  promoter_chrom, promoter_start, promoter_end and (for training) label.
- BEDPE: tab-separated, no header or a `#` header line: chrom1 start1 end1 chrom2 start2
  end2 name score strand1 strand2 label; interval 1 is the enhancer, interval 2 the promoter.
- ENCODE-rE2G's CRISPR benchmark (EPCrisprBenchmark, data/crispri-k562/README.md):
  tab-separated with a header holding chrom, chromStart, chromEnd (the perturbed element:
  the enhancer), chrTSS, startTSS, endTSS (the target gene's TSS: the promoter, so its
  window is centred on the TSS) and, for training, Regulated (TRUE/FALSE: the label). Every
  other column (measuredGeneSymbol, distanceToTSS, CellType, ...) is kept as an extra.
  Rows with an empty interval, where nothing can be centred, are set aside on reading, by
  reason, and counted by the windows stage as dropped (`frame.attrs["dropped_on_read"]`:
  reason -> pair ids): `tss_missing` (startTSS == endTSS; the benchmark writes 0, 0 for a
  gene whose TSS it lacks) and `element_empty` (chromStart == chromEnd).
  With a TSS annotation (`tss_annotation`: a BED of fixed-width windows around each gene's
  TSS, named by gene symbol, as the benchmark's own CollapsedGeneBounds.hg38.TSS500bp.bed),
  each pair's TSS is instead the centre of its gene's (`measuredGeneSymbol`) annotation window,
  as the benchmark's pipeline (EngreitzLab/CRISPR_comparison) places genes; the table's TSS
  stays as the extra column `table_tss`. A gene the annotation lacks is set aside as
  `gene_not_in_annotation`.

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
CRISPR_BENCHMARK_COLUMNS = ["chrom", "chromStart", "chromEnd", "chrTSS", "startTSS", "endTSS"]
CRISPR_BENCHMARK_TO_PAIR = dict(zip(CRISPR_BENCHMARK_COLUMNS, ELEMENT_COLUMNS))
CRISPR_BENCHMARK_LABEL = "Regulated"
EMPTY_INTERVAL_REASONS = {"promoter": "tss_missing", "enhancer": "element_empty"}
CRISPR_BENCHMARK_GENE = "measuredGeneSymbol"  # the column a TSS annotation is matched on


class PairsError(ValueError):
    """A problem in a pairs file, reported with the file, line and fix."""


def _open_text(path: Path):
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def detect_format(path: Path) -> str:
    """`targetfinder`, `bedpe` or `crispr_benchmark`, from the file's first non-empty line.

    A tab-separated header naming any of chrTSS, startTSS, endTSS (names no other format uses)
    is the CRISPR benchmark; its other columns are checked on reading.
    """
    with _open_text(path) as handle:
        for line in handle:
            if line.strip():
                first = line.lstrip("#").strip()
                break
        else:
            raise PairsError(
                f"{path}: the file is empty. Give a TargetFinder CSV, BEDPE or CRISPR benchmark file with at least "
                "one pair."
            )
    if set(first.split("\t")) & set(CRISPR_BENCHMARK_COLUMNS[3:]):
        return "crispr_benchmark"
    if "\t" not in first and len(first.split(",")) >= 6:
        return "targetfinder"  # any CSV is read as TargetFinder; missing columns are named there
    if len(first.split("\t")) >= 6:
        return "bedpe"
    raise PairsError(
        f"{path}, line 1: cannot tell the format from {first[:80]!r}. Expected a TargetFinder CSV header "
        "(enhancer_chrom,enhancer_start,...), tab-separated BEDPE (chrom1 start1 end1 chrom2 start2 end2 ...) or "
        "ENCODE-rE2G's CRISPR benchmark (a header with chrom chromStart chromEnd chrTSS startTSS endTSS Regulated)."
    )


SAMPLE_SHEET_PAIRS = "the `pairs` column of the sample sheet"  # where the workflow's pairs files are named


def read_pairs(
    path: str | Path,
    require_label: bool = True,
    tss_annotation: str | Path | None = None,
    named_in: str = SAMPLE_SHEET_PAIRS,
) -> pd.DataFrame:
    """Read and check a pairs file; returns PAIR_COLUMNS first, extra columns after.

    `header_lines` (the number of lines before the first data row) is stored in
    `frame.attrs` so that later checks can name 1-based file lines; for the CRISPR benchmark,
    so is `dropped_on_read` (reason -> pair ids of the rows set aside; module docstring), and
    with `tss_annotation` its TSSs are the annotation's (module docstring; other formats ignore it).
    `named_in`: where the user gave the path (a command's option), for the error when it is missing.
    """
    path = Path(path)
    if not path.exists():
        raise PairsError(f"Pairs file not found: {path}. Check {named_in}.")
    fmt = detect_format(path)
    readers = {"targetfinder": _read_targetfinder, "bedpe": _read_bedpe, "crispr_benchmark": _read_crispr_benchmark}
    frame, header_lines = readers[fmt](path)
    if frame.empty:
        raise PairsError(f"{path}: the table has a header but no pairs. Add at least one data row.")
    frame.attrs.update(path=str(path), format=fmt, header_lines=header_lines)
    if fmt == "crispr_benchmark":
        frame = _label_from_regulated(frame, require_label)
    if "label" not in frame.columns:
        if require_label:
            raise PairsError(f"{path}: no `label` column. Add a 0/1 label for each pair (1 = interacts).")
        frame["label"] = -1
    frame.insert(0, "pair_id", range(len(frame)))
    if fmt == "crispr_benchmark":
        annotated = tss_annotation not in (None, "")
        frame = _tss_from_annotation(frame, tss_annotation) if annotated else frame
        frame = _set_aside_empty_intervals(frame)
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


def _read_crispr_benchmark(path: Path) -> tuple[pd.DataFrame, int]:
    frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, compression="infer")
    missing = [c for c in CRISPR_BENCHMARK_COLUMNS if c not in frame.columns]
    if missing:
        raise PairsError(
            f"{path}, line 1: missing column(s) {', '.join(missing)}. ENCODE-rE2G's CRISPR benchmark format needs "
            f"{', '.join(CRISPR_BENCHMARK_COLUMNS)} (and {CRISPR_BENCHMARK_LABEL}, the label, to train); add them "
            "to the header."
        )
    if "label" in frame.columns:
        raise PairsError(
            f"{path}, line 1: a `label` column beside the benchmark's columns; its label is {CRISPR_BENCHMARK_LABEL}. "
            "Rename or remove `label`."
        )
    return frame.rename(columns=CRISPR_BENCHMARK_TO_PAIR), 1


def _label_from_regulated(frame: pd.DataFrame, require_label: bool) -> pd.DataFrame:
    """`label` from the benchmark's Regulated (TRUE -> 1, FALSE -> 0, any case); Regulated is not kept beside it."""
    path = frame.attrs["path"]
    if CRISPR_BENCHMARK_LABEL not in frame.columns:
        if require_label:
            raise PairsError(
                f"{path}, line 1: no `{CRISPR_BENCHMARK_LABEL}` column, the label of ENCODE-rE2G's CRISPR benchmark. "
                "Add it (TRUE when the element regulates the gene, else FALSE)."
            )
        return frame
    regulated = frame[CRISPR_BENCHMARK_LABEL].str.strip().str.upper()
    if require_label:
        expected = "TRUE or FALSE (TRUE: the element regulates the gene)"
        fail_at_first_bad_value(frame, ~regulated.isin(["TRUE", "FALSE"]), CRISPR_BENCHMARK_LABEL, expected)
    labels = regulated.map({"TRUE": "1", "FALSE": "0"}).fillna("")  # other values: unknown, when labels are optional
    return frame.drop(columns=CRISPR_BENCHMARK_LABEL).assign(label=labels)


def read_tss_annotation(path: str | Path) -> pd.DataFrame:
    """chrom, tss (0-based), indexed by gene symbol: the centre of each named BED interval (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise PairsError(
            f"TSS annotation not found: {path}. Give a BED of windows around each gene's TSS named by gene symbol "
            "(windows.tss_annotation; data/crispri-k562/ ships the benchmark's), or leave it empty for the table's TSS."
        )
    with _open_text(path) as handle:
        first = handle.readline()
    bed = pd.read_csv(
        path, sep="\t", header=None, skiprows=1 if first.startswith("#") else 0, dtype=str, usecols=range(4)
    )
    bed.columns = ["chrom", "start", "end", "name"]
    starts, ends = (pd.to_numeric(bed[column], errors="coerce") for column in ("start", "end"))
    bad = starts.isna() | ends.isna() | (ends <= starts)
    if bad.any():
        line = int(np.argmax(bad.to_numpy())) + 1 + (1 if first.startswith("#") else 0)
        raise PairsError(f"{path}, line {line}: start and end must be integers with start < end (BED). Fix the row.")
    tss = pd.DataFrame({"chrom": bed["chrom"], "tss": ((starts + ends) // 2).astype(np.int64), "gene": bed["name"]})
    return tss.drop_duplicates("gene").set_index("gene")


def _tss_from_annotation(frame: pd.DataFrame, annotation_path: str | Path) -> pd.DataFrame:
    """`frame` with each TSS the annotation's for its gene, the table's kept as `table_tss`; the rows whose gene
    the annotation lacks set aside as `gene_not_in_annotation`."""
    path = frame.attrs["path"]
    if CRISPR_BENCHMARK_GENE not in frame.columns:
        raise PairsError(
            f"{path}, line 1: no `{CRISPR_BENCHMARK_GENE}` column to find each pair's gene in the TSS annotation "
            f"{annotation_path}. Add it, or leave windows.tss_annotation empty to use the table's TSS."
        )
    annotation = read_tss_annotation(annotation_path)
    genes = frame[CRISPR_BENCHMARK_GENE].str.strip()
    known = genes.isin(annotation.index).to_numpy()
    if not known.any():
        raise PairsError(
            f"{path}: no gene of the table is in the TSS annotation {annotation_path} (by {CRISPR_BENCHMARK_GENE}); "
            "check that both use gene symbols of the same assembly."
        )
    frame = frame.assign(table_tss=frame["promoter_start"])
    found = annotation.loc[genes[known]]
    frame.loc[known, "promoter_chrom"] = found["chrom"].to_numpy()
    frame.loc[known, "promoter_start"] = found["tss"].astype(str).to_numpy()
    frame.loc[known, "promoter_end"] = (found["tss"] + 1).astype(str).to_numpy()
    kept = frame[known].reset_index(drop=True)
    kept.attrs.update(frame.attrs, unannotated=frame["pair_id"].to_numpy()[~known].tolist())
    return kept


def _set_aside_empty_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` less the rows whose TSS or element interval is empty; their pair ids, by reason, in its attrs."""
    keep = np.ones(len(frame), dtype=bool)
    dropped = {}
    for element, reason in EMPTY_INTERVAL_REASONS.items():
        starts, ends = (pd.to_numeric(frame[f"{element}_{end}"], errors="coerce") for end in ("start", "end"))
        empty = keep & (starts == ends).to_numpy()  # non-numbers compare unequal and fail in _check_values
        dropped[reason] = frame["pair_id"].to_numpy()[empty].tolist()
        keep &= ~empty
    if not keep.any():
        raise PairsError(
            f"{frame.attrs['path']}: every row has an empty TSS or element interval (start == end); there is nothing "
            "to centre a window on. Give each pair's element and TSS coordinates."
        )
    kept = frame[keep].reset_index(drop=True)
    if "unannotated" in frame.attrs:
        dropped["gene_not_in_annotation"] = frame.attrs["unannotated"]
    kept.attrs.update({k: v for k, v in frame.attrs.items() if k != "unannotated"}, dropped_on_read=dropped)
    return kept


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
