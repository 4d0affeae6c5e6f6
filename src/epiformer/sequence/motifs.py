"""Transcription-factor motifs: JASPAR matrices and sampled binding sites.

A motif is a position frequency matrix of shape [W, 4] with channel order A, C, G, T,
normalised so each row sums to 1. Sites are drawn base by base from the matrix, optionally
sharpened (`row ** sharpness`, renormalised) so that planted sites sit closer to the
consensus, as strong natural binding sites do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from epiformer.constants import ALPHABET

_ROW = re.compile(r"^\s*([ACGT])\s*\[?([\d\s.]+)\]?\s*$")


@dataclass(frozen=True)
class Motif:
    """A position frequency matrix (module docstring), named as JASPAR names it."""

    matrix_id: str
    name: str
    probabilities: np.ndarray  # [W, 4] float64, rows sum to 1, channels A, C, G, T

    @property
    def width(self) -> int:
        return self.probabilities.shape[0]

    def consensus(self) -> str:
        """The most likely base at each position."""
        return "".join(ALPHABET[i] for i in self.probabilities.argmax(axis=1))


def bundled_jaspar_path() -> Path:
    """The JASPAR 2022 CORE subset shipped with the package (see resources/README.md)."""
    return Path(str(resources.files("epiformer") / "resources" / "jaspar2022_core_subset.jaspar"))


def read_jaspar(path: str | Path) -> dict[str, Motif]:
    """Parse a JASPAR-format file into motifs keyed by TF name (e.g. "CTCF")."""
    motifs: dict[str, Motif] = {}
    header: tuple[str, str] | None = None
    rows: dict[str, list[float]] = {}
    lines = Path(path).read_text().splitlines() + [">"]
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if line.startswith(">"):
            if header is not None:
                motifs[header[1]] = _motif_from_rows(header, rows, path)
            fields = line[1:].split()
            header = (fields[0], fields[1] if len(fields) > 1 else fields[0]) if fields else None
            rows = {}
            continue
        match = _ROW.match(line)
        if match is None or header is None:
            raise ValueError(f"{path}, line {number}: expected a row 'A [ counts ... ]', got {line!r}")
        rows[match.group(1)] = [float(x) for x in match.group(2).split()]
    return motifs


def _motif_from_rows(header: tuple[str, str], rows: dict[str, list[float]], path) -> Motif:
    if sorted(rows) != list(ALPHABET) or len({len(r) for r in rows.values()}) != 1:
        raise ValueError(f"{path}: motif {header[0]} needs rows A, C, G, T of equal length")
    counts = np.array([rows[b] for b in ALPHABET], dtype=np.float64).T + 0.25  # pseudocount
    return Motif(header[0], header[1], counts / counts.sum(axis=1, keepdims=True))


def sample_site(motif: Motif, rng: np.random.Generator, sharpness: float = 1.0) -> str:
    """Draw one binding site (uppercase, motif strand) from the matrix."""
    probs = motif.probabilities**sharpness
    probs /= probs.sum(axis=1, keepdims=True)
    cumulative = probs.cumsum(axis=1)
    draws = rng.random((motif.width, 1))
    indices = (draws > cumulative).sum(axis=1).clip(max=3)
    return "".join(ALPHABET[i] for i in indices)


def reverse_complement(sequence: str) -> str:
    """The other strand of a DNA string, 5' to 3' (case kept; N stays N)."""
    return sequence.translate(str.maketrans("ACGTacgtNn", "TGCAtgcaNn"))[::-1]
