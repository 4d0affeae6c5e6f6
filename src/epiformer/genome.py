"""Reference genome access.

Coordinates are 0-based, half-open, as in BED. Sequences come back as uppercase ASCII
bytes; soft-masked (lowercase) bases are uppercased and any base other than A, C, G, T
becomes N. Ranges that run past a chromosome end are padded with N, so a window of width W
always yields W bases.

pyfaidx handles are not shared across processes: each process (or DataLoader worker)
opens its own `Genome`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from pyfaidx import Fasta

_CLEAN = np.full(256, ord("N"), dtype=np.uint8)
for _base in b"ACGT":
    _CLEAN[_base] = _base
    _CLEAN[ord(chr(_base).lower())] = _base


class Genome:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"Genome FASTA not found: {self.path}. Check `genomes:` in config/config.yaml.")
        try:
            self._fasta = Fasta(str(self.path), as_raw=True, sequence_always_upper=False, rebuild=False)
        except Exception as error:  # pyfaidx raises several types for a bad FASTA or index
            raise ValueError(
                f"Cannot index genome FASTA {self.path}: {error}. It must be plain or bgzip-compressed FASTA; "
                f"rebuild the index with `samtools faidx {self.path}` if a stale .fai lies beside it."
            ) from error
        self.sizes: dict[str, int] = {name: len(record) for name, record in self._fasta.items()}

    def fetch(self, chrom: str, start: int, end: int) -> bytes:
        """Bases [start, end) of `chrom`, N-padded past either end, cleaned to A/C/G/T/N."""
        size = self.sizes[chrom]
        left, right = max(0, -start), max(0, end - size)
        raw = self._fasta[chrom][max(0, start) : min(size, end)] if start < size and end > 0 else ""
        body = _CLEAN[np.frombuffer(raw.encode("ascii"), dtype=np.uint8)].tobytes()
        return b"N" * min(left, end - start) + body + b"N" * min(right, end - start)

    def index_sha256(self) -> str:
        """Checksum of the FASTA index: names and lengths of every sequence."""
        return hashlib.sha256(Path(f"{self.path}.fai").read_bytes()).hexdigest()

    def close(self) -> None:
        self._fasta.close()
