"""Per-base signal tracks as bigWig files (pyBigWig), e.g. attribution scores along the genome.

Contract of a signal: per chromosome, `starts` (int64 [N], 0-based) and `values` (float [N]);
value i covers the one base [starts[i], starts[i] + 1). Starts are strictly increasing (so
sorted and non-overlapping) and within [0, chromosome size); values are finite. Bases with
no value are absent from the file (a browser shows no data there, not 0).

Overlapping windows (each window a start and one value per base, as an attribution map of a
sliding window) become such a signal with `mean_per_base`, which averages, at each base,
the values of every window that covers it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from epiformer.io.files import atomic_write


class BigWigError(ValueError):
    """A signal that cannot be written as a bigWig, reported with the chromosome, position and fix."""


def mean_per_base(window_starts: Sequence[int] | np.ndarray, window_values) -> tuple[np.ndarray, np.ndarray]:
    """(starts, values) of every base covered by a window: the mean of the windows' values there.

    `window_starts` int [W] (0-based); `window_values` one 1-D array per window (lengths may
    differ) or a float array [W, L]. Returns int64 [N] strictly increasing and float64 [N].
    """
    window_values = [np.asarray(values, dtype=np.float64) for values in window_values]
    if len(window_values) != len(window_starts):
        raise BigWigError(f"{len(window_starts)} window starts but {len(window_values)} value arrays; give one each.")
    if not window_values:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    positions = np.concatenate(
        [int(start) + np.arange(len(values)) for start, values in zip(window_starts, window_values)]
    )
    values = np.concatenate(window_values)
    if positions.size and positions.min() < 0:
        raise BigWigError(f"a window starts at {int(positions.min())}; starts are 0-based positions (>= 0).")
    sums = np.bincount(positions, weights=values)
    counts = np.bincount(positions)
    covered = np.flatnonzero(counts)
    return covered.astype(np.int64), sums[covered] / counts[covered]


def check_signal(chrom: str, starts: np.ndarray, values: np.ndarray, size: int) -> None:
    """Raise BigWigError unless `starts`/`values` meet the module's contract on a chromosome of `size` bases."""
    if starts.shape != values.shape or starts.ndim != 1:
        raise BigWigError(f"{chrom}: starts {starts.shape} and values {values.shape} must be 1-D of one length.")
    steps = np.flatnonzero(np.diff(starts) <= 0)
    if steps.size:
        i = int(steps[0])
        raise BigWigError(
            f"{chrom}: start {int(starts[i + 1])} at index {i + 1} follows {int(starts[i])}; starts must be strictly "
            "increasing, one value per base. Sort them, and average overlapping windows first (mean_per_base)."
        )
    if starts.size and (starts[0] < 0 or starts[-1] >= size):
        bad = int(starts[0]) if starts[0] < 0 else int(starts[-1])
        raise BigWigError(
            f"{chrom}: position {bad} is outside the chromosome (0 to {size - 1}). Check the genome build."
        )
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise BigWigError(
            f"{chrom}: value {values[bad[0]]} at position {int(starts[bad[0]])}; values must be finite. Leave such "
            "bases out (they are shown as no data)."
        )


def write_bigwig(
    path: str | Path,
    chrom_sizes: Mapping[str, int],
    signal: Mapping[str, tuple[Sequence[int] | np.ndarray, Sequence[float] | np.ndarray]],
) -> None:
    """Write `signal` (chromosome -> (starts, values), see the module docstring) as a bigWig at `path`.

    The header lists every chromosome of `chrom_sizes` in its order (a FASTA index's order);
    a chromosome of `signal` missing from it is an error. Written atomically.
    """
    import pyBigWig

    if not chrom_sizes:
        raise BigWigError(f"{path}: no chromosome sizes; give the genome's (e.g. read from its .fai).")
    unknown = [chrom for chrom in signal if chrom not in chrom_sizes]
    if unknown:
        raise BigWigError(
            f"{path}: chromosome {unknown[0]!r} has a signal but no size ({len(unknown)} such). Give the sizes of "
            "the genome the signal was computed on."
        )
    arrays = {}
    for chrom, (starts, values) in signal.items():
        starts, values = np.asarray(starts, dtype=np.int64), np.asarray(values, dtype=np.float64)
        check_signal(chrom, starts, values, int(chrom_sizes[chrom]))
        arrays[chrom] = starts, values

    def write(temporary: Path) -> None:
        bigwig = pyBigWig.open(str(temporary), "w")
        try:
            bigwig.addHeader([(chrom, int(size)) for chrom, size in chrom_sizes.items()])
            for chrom in chrom_sizes:  # entries must follow the header's chromosome order
                starts, values = arrays.get(chrom, (np.zeros(0), np.zeros(0)))
                if len(starts) and not pyBigWig.numpy:  # a pyBigWig built without numpy takes lists
                    starts, values = starts.tolist(), values.tolist()
                if len(starts):
                    bigwig.addEntries(chrom, starts, values=values, span=1)
        finally:
            bigwig.close()

    atomic_write(path, write)
