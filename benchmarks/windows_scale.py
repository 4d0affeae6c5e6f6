"""The windows stage on a large pairs table: wall time and peak memory.

Writes a random genome and a TargetFinder CSV of `--pairs` rows (default 1,000,000) to a
temporary folder, then runs the whole stage (read, validate, windows with the N filter,
chromosome split, bedtools audit, outputs) in a fresh process and prints its wall time and
peak resident memory (ru_maxrss). Usage: python benchmarks/windows_scale.py [--pairs N]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STAGE = """
import sys
from epiformer.data.splits import SplitSpec
from epiformer.data.windows import WindowSpec, build_windows
folder = sys.argv[1]
report = build_windows(f"{folder}/pairs.csv", f"{folder}/genome.fa", WindowSpec(3000, 2000),
                       SplitSpec(val_chromosomes=("chr5",), test_chromosomes=("chr6",)),
                       f"{folder}/windows.tsv", f"{folder}/split_audit.tsv", f"{folder}/windows_stats.json")
print(report)
"""


def write_inputs(folder: Path, pairs: int, chromosomes: int, length: int, rng: np.random.Generator) -> None:
    with open(folder / "genome.fa", "wb") as handle:
        for number in range(1, chromosomes + 1):
            seq = np.frombuffer(b"ACGTacgt", np.uint8)[rng.choice(8, length, p=[0.22] * 4 + [0.03] * 4)]
            handle.write(f">chr{number}\n".encode())
            handle.write(b"\n".join(seq[i : i + 60].tobytes() for i in range(0, length, 60)) + b"\n")
    chrom = rng.integers(1, chromosomes + 1, pairs)
    enhancer = rng.integers(0, length - 500, pairs)
    promoter = np.clip(enhancer + rng.integers(-200_000, 200_000, pairs), 0, length - 500)
    label = (rng.random(pairs) < 0.05).astype(int)
    names = np.char.add("chr", chrom.astype(str))
    columns = [names, enhancer, enhancer + 400, names, promoter, promoter + 300, label]
    lines = "\n".join(",".join(map(str, row)) for row in zip(*columns))
    header = "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label\n"
    (folder / "pairs.csv").write_text(header + lines + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--chromosomes", type=int, default=6)
    parser.add_argument("--chromosome-length", type=int, default=20_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        write_inputs(Path(folder), args.pairs, args.chromosomes, args.chromosome_length, np.random.default_rng(0))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", STAGE, folder], check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"{args.pairs} pairs: {seconds:.1f} s wall ({args.pairs / seconds:,.0f} pairs/s), peak RSS {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
