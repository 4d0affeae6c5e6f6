"""Reading variants from a VCF, with the file line of every record.

A VCF (4.x, plain, gzip or bgzip-compressed) is read with pysam (htslib). htslib does not
say which line it could not parse, so the text is read beside it: the header is checked
first (`##fileformat=VCF...` on line 1, a `#CHROM` line before the data), then each data
line is checked for what htslib cannot parse (at least 8 tab-separated columns, POS a
positive integer, REF made of bases) before htslib reads it, and any error htslib still
raises is reported at the line it was reading. Errors are `VcfError`s that name the file,
the 1-based line (header lines counted) and the fix.

Records come one at a time (`read_vcf`), so memory does not grow with the file. POS is
1-based, as in the file; REF and ALT are upper-cased (VCF bases are case-insensitive).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from epiformer.io.bgzf import gzip_kind

FIXED_COLUMNS = ("CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO")
REF_BASES = re.compile(r"[ACGTNacgtn]+")
FIX = "Fix or remove that line: a VCF record is CHROM POS ID REF ALT QUAL FILTER INFO, separated by tabs."


class VcfError(ValueError):
    """A VCF that cannot be read, or that does not match the genome; the message names the file, line and fix."""


@dataclass(frozen=True)
class VcfRecord:
    """One VCF data line: where it is in the file, its position and its alleles."""

    line: int  # 1-based line in the file, header lines counted
    chrom: str
    pos: int  # 1-based, as in the file
    id: str
    ref: str  # upper case
    alts: tuple[str, ...]  # upper case; empty when ALT is `.`

    @property
    def start(self) -> int:
        """0-based start of REF."""
        return self.pos - 1


def _open_text(path: Path):
    """The file as text, decompressed when gzip or bgzip; VcfError for a missing file or BCF."""
    if not path.is_file():
        raise VcfError(f"VCF not found: {path}. Give the variants to score (--vcf), plain or bgzip-compressed.")
    kind = gzip_kind(path)
    opener = open if kind == "plain" else gzip.open
    try:
        with opener(path, "rb") as raw:
            binary = raw.read(3) == b"BCF"
    except (OSError, EOFError) as error:
        raise VcfError(
            f"{path} cannot be read as {kind} text ({error}). Give a VCF, plain or bgzip-compressed."
        ) from error
    if binary:
        raise VcfError(
            f"{path} is BCF (binary), not VCF text. Convert it: `bcftools view -Oz -o variants.vcf.gz {path}`."
        )
    return opener(path, "rt", encoding="utf-8", errors="replace")


def _read_header(path: Path, lines: Iterator[tuple[int, str]]) -> int:
    """Read the header lines; returns the number of the #CHROM line."""
    for number, line in lines:
        if number == 1 and not line.startswith("##fileformat=VCF"):
            raise VcfError(
                f"{path}, line 1: a VCF starts with a `##fileformat=VCFv4.x` line, not {line[:60]!r}. "
                "Give a VCF file (with its header), or add the header lines."
            )
        if line.startswith("#CHROM"):
            return number
        if not line.startswith("##"):
            raise VcfError(
                f"{path}, line {number}: {line[:60]!r} comes before the `#CHROM POS ID REF ALT QUAL FILTER INFO` "
                "header line. Add that line at the end of the header."
            )
    raise VcfError(f"{path}: no `#CHROM` header line. A VCF header ends with `#CHROM POS ID REF ALT ...`.")


def _check_data_line(path: Path, number: int, line: str) -> None:
    """Raise VcfError for a data line htslib could not parse, naming the line and what is wrong."""
    where = f"{path}, line {number}"
    if not line.strip():
        raise VcfError(f"{where}: an empty line among the records. Remove it.")
    fields = line.split("\t")
    if len(fields) < len(FIXED_COLUMNS):
        spaces = " It seems separated by spaces: VCF columns are separated by tabs." if " " in line else ""
        raise VcfError(
            f"{where}: {len(fields)} tab-separated column(s); a VCF record has at least 8 "
            f"({' '.join(FIXED_COLUMNS)}).{spaces} {FIX}"
        )
    if not fields[0]:
        raise VcfError(f"{where}: CHROM is empty. {FIX}")
    if not fields[1].isdigit() or int(fields[1]) < 1:
        raise VcfError(f"{where}: POS is {fields[1]!r}; it must be a positive integer (1-based). {FIX}")
    if not REF_BASES.fullmatch(fields[3]):
        raise VcfError(f"{where}: REF is {fields[3]!r}; it must be bases (A, C, G, T, N). {FIX}")


def _data_lines(path: Path, handle) -> Iterator[int]:
    """The numbers of the data lines, each checked (`_check_data_line`) before it is yielded."""
    lines = ((number, line.rstrip("\r\n")) for number, line in enumerate(handle, start=1))
    _read_header(path, lines)
    for number, line in lines:
        _check_data_line(path, number, line)
        yield number


def count_data_lines(path: str | Path) -> int:
    """Lines after the header (a fast count, for progress; blank lines included)."""
    with _open_text(Path(path)) as handle:
        try:
            return sum(1 for line in handle if not line.startswith("#"))
        except (OSError, EOFError) as error:
            raise _unreadable(path, error) from error


def _next_number(path: Path, numbers: Iterator[int]) -> int | None:
    """The next data line's number (None at the end); VcfError when the file cannot be decompressed further."""
    try:
        return next(numbers, None)
    except (OSError, EOFError) as error:
        raise _unreadable(path, error) from error


def _unreadable(path: str | Path, error: Exception) -> VcfError:
    return VcfError(f"{path}: cannot be read to its end ({error}): truncated or corrupt? Re-make it.")


def read_vcf(path: str | Path) -> Iterator[VcfRecord]:
    """The records of a VCF in file order, one at a time, checked as the module docstring says."""
    import pysam

    path = Path(path)
    with _open_text(path) as handle:
        numbers = _data_lines(path, handle)
        first = _next_number(path, numbers)  # the header is checked before htslib reads it
        verbosity = pysam.set_verbosity(0)  # htslib's warnings (contigs missing from the header) would flood the log
        try:
            try:
                vcf = pysam.VariantFile(str(path))
            except (OSError, ValueError) as error:
                raise VcfError(
                    f"{path}: htslib cannot read the header ({error}). Check the `##` header lines."
                ) from error
            with vcf:
                records = iter(vcf)
                number = first
                while number is not None:
                    try:
                        record = next(records)
                    except (OSError, ValueError, StopIteration) as error:
                        raise VcfError(
                            f"{path}, line {number}: htslib cannot parse this record ({error}). {FIX}"
                        ) from error
                    yield VcfRecord(
                        number,
                        record.chrom,
                        record.pos,
                        record.id or ".",
                        record.ref.upper(),
                        tuple(alt.upper() for alt in record.alts or ()),
                    )
                    number = _next_number(path, numbers)
        finally:
            pysam.set_verbosity(verbosity)
