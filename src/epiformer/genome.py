"""Reference genome access.

Coordinates are 0-based, half-open, as in BED. Sequences come back as uppercase ASCII;
soft-masked (lowercase) bases are uppercased and any base other than A, C, G, T becomes N,
so a window's sequence equals what `bedtools getfasta` prints for it once cleaned that way.
Ranges that run past a chromosome end are padded with N, so a window of width W always
yields W bases.

The FASTA index (`.fai`, made once by `index_fasta`, the workflow's `index_genome` rule)
gives each sequence's byte offset and line layout, so a plain FASTA is read through a
memory map: random access to any window, memory bounded by the OS page cache, no
chromosome held in RAM. bgzip-compressed FASTA goes through pyfaidx instead.

Handles are not shared across processes: each process (or DataLoader worker) opens its own
`Genome`.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from epiformer.fileio import sha256_file

N = ord("N")
CLEAN_TABLE = np.full(256, N, dtype=np.uint8)
for _base in b"ACGT":
    CLEAN_TABLE[_base] = _base
    CLEAN_TABLE[ord(chr(_base).lower())] = _base
CLEAN_BYTES = CLEAN_TABLE.tobytes()


class GenomeError(ValueError):
    """A genome that cannot be read, or that does not match the pairs."""


@dataclass(frozen=True)
class IndexEntry:
    length: int
    offset: int
    line_bases: int
    line_bytes: int


def fai_path(fasta: str | Path) -> Path:
    return Path(f"{fasta}.fai")


def index_fasta(fasta: str | Path) -> Path:
    """Write `{fasta}.fai` (samtools-compatible) with pyfaidx; returns its path."""
    from pyfaidx import Faidx

    fasta = Path(fasta)
    if not fasta.exists():
        raise FileNotFoundError(f"Genome FASTA not found: {fasta}. Check `genomes:` in config/config.yaml.")
    try:
        Faidx(str(fasta), rebuild=True).close()
    except Exception as error:  # pyfaidx raises several types for malformed FASTA
        raise GenomeError(
            f"Cannot index genome FASTA {fasta}: {error}. It must be plain or bgzip-compressed FASTA "
            "with lines of equal length within each sequence (`samtools faidx` has the same rule)."
        ) from error
    return fai_path(fasta)


def read_index(fai: str | Path) -> dict[str, IndexEntry]:
    entries = {}
    for number, line in enumerate(Path(fai).read_text().splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 5:
            raise GenomeError(f"{fai}, line {number}: not a FASTA index line; delete the file to rebuild it.")
        entries[fields[0]] = IndexEntry(*(int(x) for x in fields[1:5]))
    return entries


def chromosome_sizes(fai: str | Path) -> dict[str, int]:
    return {name: entry.length for name, entry in read_index(fai).items()}


class Genome:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"Genome FASTA not found: {self.path}. Check `genomes:` in config/config.yaml.")
        if not fai_path(self.path).exists():
            index_fasta(self.path)
        self.index = read_index(fai_path(self.path))
        self.sizes = {name: entry.length for name, entry in self.index.items()}
        self._handle = open(self.path, "rb")
        self._compressed = self._handle.read(2) == b"\x1f\x8b"
        if self._compressed:
            from pyfaidx import Fasta

            self._fasta = Fasta(str(self.path), as_raw=True, rebuild=False)
        else:
            self._map = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)

    def _cleaned(self, chrom: str, start: int, end: int) -> bytes:
        """Bases [start, end) within the chromosome, cleaned to A/C/G/T/N."""
        if self._compressed:
            return self._fasta[chrom][start:end].encode("ascii").translate(CLEAN_BYTES)
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
