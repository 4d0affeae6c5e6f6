"""Window extraction: epiformer's Genome.fetch_many against `bedtools getfasta` (and pyfaidx).

Writes a random genome with soft-masked stretches to a temporary folder, draws windows, and
times each method producing the same thing: a uint8 [N, W] array of cleaned bases (A/C/G/T/N).
bedtools is timed with reading and cleaning its output, since that is what a pipeline must do
with it. Prints the median of several repeats, windows per second, and the ratio to bedtools,
and checks that all methods agree. Usage: python benchmarks/extract_windows.py [--windows 20000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from epiformer.data.genome import CLEAN_TABLE, Genome, index_fasta


def write_random_genome(path: Path, chromosomes: int, length: int, rng: np.random.Generator) -> dict[str, int]:
    sizes = {}
    with open(path, "wb") as handle:
        for number in range(1, chromosomes + 1):
            seq = np.frombuffer(b"ACGTacgtN", np.uint8)[rng.choice(9, length, p=[0.22] * 4 + [0.02] * 4 + [0.04])]
            handle.write(f">chr{number}\n".encode())
            for offset in range(0, length, 60):
                handle.write(seq[offset : offset + 60].tobytes() + b"\n")
            sizes[f"chr{number}"] = length
    return sizes


def via_bedtools(fasta: Path, bed: Path, width: int) -> np.ndarray:
    out = subprocess.run(
        ["bedtools", "getfasta", "-fi", str(fasta), "-bed", str(bed), "-tab"], check=True, capture_output=True
    ).stdout
    sequences = b"".join(line.split(b"\t", 1)[1] for line in out.splitlines())
    return CLEAN_TABLE[np.frombuffer(sequences, np.uint8)].reshape(-1, width)


def via_pyfaidx(fasta: Path, chroms, starts, ends) -> np.ndarray:
    from pyfaidx import Fasta

    with Fasta(str(fasta), as_raw=True) as handle:
        sequences = b"".join(handle[c][s:e].encode() for c, s, e in zip(chroms, starts, ends))
    return CLEAN_TABLE[np.frombuffer(sequences, np.uint8)].reshape(len(starts), -1)


def via_epiformer(fasta: Path, chroms, starts, ends) -> np.ndarray:
    with Genome(fasta) as genome:
        return genome.fetch_many(chroms, starts, ends)


def median_time(function, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--windows", type=int, default=20_000)
    parser.add_argument("--width", type=int, default=5_000)
    parser.add_argument("--chromosomes", type=int, default=4)
    parser.add_argument("--chromosome-length", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        fasta, bed = Path(folder) / "genome.fa", Path(folder) / "windows.bed"
        sizes = write_random_genome(fasta, args.chromosomes, args.chromosome_length, rng)
        index_fasta(fasta)
        chroms = rng.choice(list(sizes), args.windows).tolist()
        starts = rng.integers(0, args.chromosome_length - args.width, args.windows)
        ends = starts + args.width
        bed.write_text("".join(f"{c}\t{s}\t{e}\n" for c, s, e in zip(chroms, starts, ends)))
        methods = {
            "bedtools getfasta + read": lambda: via_bedtools(fasta, bed, args.width),
            "pyfaidx slicing": lambda: via_pyfaidx(fasta, chroms, starts, ends),
            "epiformer Genome.fetch_many": lambda: via_epiformer(fasta, chroms, starts, ends),
        }
        timings = {name: median_time(function, args.repeats) for name, function in methods.items()}
    reference = timings["bedtools getfasta + read"]
    print(f"{args.windows} windows of {args.width} bp, median of {args.repeats} runs")
    print(f"{'method':<30} {'seconds':>8} {'windows/s':>10} {'speed vs bedtools':>18} {'same bases':>11}")
    for name, (seconds, result) in timings.items():
        same = np.array_equal(result, reference[1])
        print(
            f"{name:<30} {seconds:>8.3f} {args.windows / seconds:>10.0f} {reference[0] / seconds:>17.2f}x {same!s:>11}"
        )


if __name__ == "__main__":
    main()
