"""Reference genome access.

Coordinates are 0-based, half-open, as in BED. Sequences come back as uppercase ASCII;
soft-masked (lowercase) bases are uppercased and any base other than A, C, G, T becomes N,
so a window's sequence equals what `bedtools getfasta` prints for it once cleaned that way.
Ranges that run past a chromosome end are padded with N, so a window of width W always
yields W bases.

The FASTA index (`.fai`, made once by `index_fasta`, the workflow's `index_genome` rule)
gives each sequence's byte offset and line layout, so a plain FASTA is read through a
memory map: random access to any window, memory bounded by the OS page cache, no
chromosome held in RAM. A bgzip-compressed (BGZF) FASTA is read through htslib (pysam),
which needs the `.gzi` block index beside the `.fai`; `index_fasta` writes both. Plain
gzip cannot be read at random positions and is refused with how to recompress it.

Handles are not shared across processes: each process (or DataLoader worker) opens its own
`Genome`.
"""

from __future__ import annotations

import mmap
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from epiformer.constants import ALPHABET
from epiformer.data.chromosomes import GenomeError, fai_path
from epiformer.io.bgzf import gzip_kind
from epiformer.io.files import atomic_write, sha256_file, temporary_path
from epiformer.sequence.onehot import one_hot

N = ord("N")
CLEAN_TABLE = np.full(256, N, dtype=np.uint8)
for _base in ALPHABET.encode():
    CLEAN_TABLE[_base] = _base
    CLEAN_TABLE[ord(chr(_base).lower())] = _base
CLEAN_BYTES = CLEAN_TABLE.tobytes()


@dataclass(frozen=True)
class IndexEntry:
    """One line of a FASTA index (.fai): a sequence's length, byte offset and line layout."""

    length: int
    offset: int
    line_bases: int
    line_bytes: int


def gzi_path(fasta: str | Path) -> Path:
    """The BGZF block index htslib reads beside a bgzip-compressed FASTA."""
    return Path(f"{fasta}.gzi")


def require_fasta(fasta: str | Path) -> Path:
    """The path of a genome FASTA that exists, or a GenomeError that says what to give."""
    fasta = Path(fasta)
    if not fasta.is_file():
        raise GenomeError(
            f"Genome FASTA not found: {fasta}. Give the FASTA (plain or bgzip-compressed) of the build the pairs' "
            "coordinates refer to: `genomes:` in the config, or --genome on the command line."
        )
    return fasta


def fasta_format(fasta: str | Path) -> str:
    """`plain` or `bgzf`; a gzip file that is not BGZF raises GenomeError saying how to fix it."""
    kind = gzip_kind(fasta)
    if kind == "gzip":
        raise GenomeError(
            f"Genome FASTA {fasta} is compressed with plain gzip, which cannot be read at random positions. "
            f"Recompress it with bgzip (Debian/Ubuntu package tabix: `sudo apt-get install -y tabix`): "
            f"`zcat {fasta} | bgzip -c > {fasta}.bgz && mv {fasta}.bgz {fasta}`, or decompress it "
            f"(`gunzip -c {fasta} > genome.fa`) and point `genomes:` in config/config.yaml at the plain file."
        )
    return kind


def index_fasta(fasta: str | Path) -> Path:
    """Write `{fasta}.fai` (samtools-compatible), and `{fasta}.gzi` for bgzip; returns the `.fai` path.

    Plain FASTA is indexed with pyfaidx; bgzip FASTA with htslib (pysam). Either way the
    index files are written under temporary names and renamed into place, so an interrupted
    or failed run leaves none, and a run that reads the genome while another (in another
    folder, say) indexes it reads a whole index or none. Plain gzip raises GenomeError (see
    `fasta_format`).
    """
    fasta = require_fasta(fasta)
    if fasta_format(fasta) == "bgzf":
        _index_bgzf(fasta)
        return fai_path(fasta)
    from pyfaidx import Faidx

    def write_index(temporary: Path) -> None:
        try:
            Faidx(str(fasta), indexname=str(temporary), rebuild=True).close()
        except Exception as error:  # pyfaidx raises several types for malformed FASTA
            raise GenomeError(
                f"Cannot index genome FASTA {fasta}: {sentence(error)} It must be plain or bgzip-compressed FASTA "
                "with lines of equal length within each sequence (`samtools faidx` has the same rule)."
            ) from error

    atomic_write(fai_path(fasta), write_index)
    return fai_path(fasta)


def sentence(message) -> str:
    """A library's message as one sentence of ours: stripped, ending in exactly one full stop."""
    return str(message).strip().rstrip(".") + "."


def _index_bgzf(fasta: Path) -> None:
    import pysam

    fai, gzi = temporary_path(fai_path(fasta)), temporary_path(gzi_path(fasta))
    try:
        failure, detail = _with_fd2_captured(
            lambda: pysam.faidx(str(fasta), "--fai-idx", str(fai), "--gzi-idx", str(gzi)), pysam.utils.SamtoolsError
        )
        if failure is not None:
            raise GenomeError(
                f"Cannot index bgzip genome FASTA {fasta}: {sentence(detail or failure)} It must be FASTA with lines "
                "of equal length within each sequence (`samtools faidx` has the same rule)."
            ) from failure
        if detail:
            sys.stderr.write(detail + "\n")
        os.replace(gzi, gzi_path(fasta))
        os.replace(fai, fai_path(fasta))
    finally:
        fai.unlink(missing_ok=True)
        gzi.unlink(missing_ok=True)


def _with_fd2_captured(call, expected: type[Exception]) -> tuple[Exception | None, str]:
    """Run `call()`; return (the `expected` exception it raised or None, what it wrote to fd 2).

    htslib reports why indexing failed, with the line number, on file descriptor 2 rather
    than in the exception pysam raises, so the message is captured to put in ours.
    """
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            call()
            failure = None
        except expected as error:
            failure = error
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return failure, captured.read().decode(errors="replace").strip()


def read_index(fai: str | Path) -> dict[str, IndexEntry]:
    """Every sequence's IndexEntry from a FASTA index, in file order; GenomeError names a bad line."""
    entries = {}
    for number, line in enumerate(Path(fai).read_text().splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 5:
            raise GenomeError(f"{fai}, line {number}: not a FASTA index line; delete the file to rebuild it.")
        entries[fields[0]] = IndexEntry(*(int(x) for x in fields[1:5]))
    return entries


class Genome:
    """Random access to a plain or bgzip-compressed FASTA (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = require_fasta(path)
        self._compressed = fasta_format(self.path) == "bgzf"
        if not fai_path(self.path).exists() or (self._compressed and not gzi_path(self.path).exists()):
            index_fasta(self.path)
        self.index = read_index(fai_path(self.path))
        self.sizes = {name: entry.length for name, entry in self.index.items()}
        if self._compressed:
            import pysam

            self._fasta = pysam.FastaFile(
                str(self.path),
                filepath_index=str(fai_path(self.path)),
                filepath_index_compressed=str(gzi_path(self.path)),
            )
        else:
            self._handle = open(self.path, "rb")
            self._map = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)

    def _cleaned(self, chrom: str, start: int, end: int) -> bytes:
        """Bases [start, end) within the chromosome, cleaned to A/C/G/T/N."""
        if self._compressed:
            return self._fasta.fetch(chrom, start, end).encode("ascii").translate(CLEAN_BYTES)
        entry = self.index[chrom]
        first = entry.offset + (start // entry.line_bases) * entry.line_bytes + start % entry.line_bases
        last = entry.offset + ((end - 1) // entry.line_bases) * entry.line_bytes + (end - 1) % entry.line_bases
        # One C-level pass drops the line breaks and maps every byte through the cleaning table.
        return self._map[first : last + 1].translate(CLEAN_BYTES, b"\r\n")

    def fetch(self, chrom: str, start: int, end: int) -> bytes:
        """Bases [start, end) of `chrom`, N-padded past either end, cleaned to A/C/G/T/N."""
        return self.fetch_many([chrom], [start], [end])[0].tobytes()

    def fetch_many(self, chroms, starts, ends) -> np.ndarray:
        """uint8 [N, W] ASCII codes (A/C/G/T/N) of equal-width windows, N-padded past chromosome ends."""
        starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        widths = set((ends - starts).tolist())
        if len(widths) > 1:
            raise ValueError(f"fetch_many needs windows of one width, got {sorted(widths)[:5]}")
        out = np.full((len(starts), widths.pop() if widths else 0), N, dtype=np.uint8)
        for row, (chrom, start, end) in enumerate(zip(chroms, starts.tolist(), ends.tolist())):
            inner_start, inner_end = max(start, 0), min(end, self.sizes[chrom])
            if inner_start < inner_end:
                cleaned = self._cleaned(chrom, inner_start, inner_end)
                out[row, inner_start - start : inner_end - start] = np.frombuffer(cleaned, dtype=np.uint8)
        return out

    def one_hot(self, chrom: str, start: int, end: int) -> np.ndarray:
        """uint8 [L, 4] one-hot of bases [start, end) (N and past the chromosome ends: all zeros), as GenomeStore's."""
        return one_hot(self.fetch_many([chrom], [start], [end]))[0]

    def index_sha256(self) -> str:
        """Checksum of the FASTA index: names, lengths and layout of every sequence."""
        return sha256_file(fai_path(self.path))

    def close(self) -> None:
        if self._compressed:
            self._fasta.close()
        else:
            self._map.close()
            self._handle.close()

    def __enter__(self) -> Genome:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
