"""A human-sized genome, plain against bgzip: build, index, the genome store and the windows stage, time and memory.

Builds the real-data genome (data/targetfinder: hg19's 24 chromosomes at true length, N except
the TargetFinder contigs) as bgzip with `epiformer.synthetic.fragment_genome`, decompresses it to a plain
3.1 GB FASTA in a temporary folder (deleted afterwards), then on each of the two files times
indexing (`index_fasta`: pyfaidx for plain, htslib for bgzip), building the genome store
(`data.encode_genome.build_store`: every base one-hot packed at 4 bits, once; its size is
printed against the genome's bases at that packing) and the whole windows stage
(`build_windows`: read pairs, place windows, N filter, chromosome split, bedtools audit,
outputs) for each window width pair. Every step runs in a fresh process, one at a time; its
wall time and peak resident memory (ru_maxrss of that process, from os.wait4) are printed
side by side with the bgzip/plain ratio. Resident memory of the plain genome counts the pages
of the memory-mapped file it touched (reclaimable page cache, not heap).

Usage: python benchmarks/genome_scale.py [--pairs data/targetfinder/GM12878.pairs.csv]
       [--widths 3000,2000 200,200] [--tmp DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "targetfinder"

STEPS = {
    "build": """
import sys
from epiformer.synthetic.fragment_genome import build_fragment_genome
build_fragment_genome(sys.argv[1], sys.argv[2], sys.argv[3])
""",
    "decompress": """
import gzip, shutil, sys
with gzip.open(sys.argv[1], "rb") as source, open(sys.argv[2], "wb") as target:
    shutil.copyfileobj(source, target, 1 << 20)
""",
    "index": """
import sys
from epiformer.data.genome import index_fasta
index_fasta(sys.argv[1])
""",
    "store": """
import sys
from epiformer.data.encode_genome import build_store
build_store(sys.argv[1], sys.argv[2])
""",
    "windows": """
import sys
from epiformer.data.splits import SplitSpec
from epiformer.data.windows import WindowSpec, build_windows
pairs, genome, enhancer, promoter, out = sys.argv[1:6]
build_windows(pairs, genome, WindowSpec(int(enhancer), int(promoter)),
              SplitSpec(val_chromosomes=("chr7", "chr10"), test_chromosomes=("chr8", "chr9")),
              f"{out}/windows.tsv", f"{out}/split_audit.tsv", f"{out}/windows_stats.json")
""",
}


def run_step(step: str, *args: str | Path) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one step in a fresh Python process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", STEPS[step], *map(str, args)], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here; tell Popen so it does not wait again
    if process.returncode != 0:
        raise SystemExit(f"step {step} {args} failed with exit status {process.returncode}")
    return seconds, usage.ru_maxrss / 1024


def row(name: str, plain: tuple[float, float] | None, bgzip: tuple[float, float] | None) -> str:
    def cells(figures):
        return f"{figures[0]:>9.2f} {figures[1]:>9,.0f}" if figures else f"{'':>9} {'':>9}"

    ratios = f"{bgzip[0] / plain[0]:>8.2f}x {bgzip[1] / plain[1]:>7.2f}x" if plain and bgzip else ""
    return f"{name:<28} {cells(plain)}   {cells(bgzip)}   {ratios}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fragments", type=Path, default=DATA / "hg19_fragments.fa.gz")
    parser.add_argument("--sizes", type=Path, default=DATA / "hg19.chrom.sizes")
    parser.add_argument("--pairs", type=Path, default=DATA / "GM12878.pairs.csv")
    parser.add_argument("--widths", nargs="+", default=["3000,2000", "200,200"], help="enhancer,promoter widths")
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the 3.1 GB plain genome")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as folder:
        folder = Path(folder)
        bgzip, plain = folder / "hg19.fa.gz", folder / "hg19.fa"
        build = run_step("build", args.fragments, args.sizes, bgzip)
        decompress = run_step("decompress", bgzip, plain)
        for index in folder.glob("hg19.fa.gz.*"):  # time htslib indexing too, not only our builder's indexes
            index.unlink()
        indexing = {name: run_step("index", path) for name, path in (("plain", plain), ("bgzip", bgzip))}
        store = {
            name: run_step("store", path, folder / f"store-{name}")
            for name, path in (("plain", plain), ("bgzip", bgzip))
        }
        store_bytes = sum(path.stat().st_size for path in (folder / "store-plain").glob("chrom-*.u8"))
        same_store = all(
            path.read_bytes() == (folder / "store-bgzip" / path.name).read_bytes()
            for path in sorted((folder / "store-plain").iterdir())
            if path.suffix == ".u8"
        )
        bases = sum(int(line.split()[1]) for line in open(args.sizes) if line.strip())
        windows = {}
        for widths in args.widths:
            enhancer, promoter = widths.split(",")
            for name, path in (("plain", plain), ("bgzip", bgzip)):
                out = folder / f"windows-{name}-{enhancer}-{promoter}"
                out.mkdir()
                windows[widths, name] = run_step("windows", args.pairs, path, enhancer, promoter, out)
        sizes = {name: path.stat().st_size / 1e6 for name, path in (("plain", plain), ("bgzip", bgzip))}
        gzi = (folder / "hg19.fa.gz.gzi").stat().st_size / 1e6
    print(f"Genome: {args.sizes} ({sum(1 for _ in open(args.sizes))} chromosomes), contigs from {args.fragments}")
    print(
        f"File size: plain {sizes['plain']:,.0f} MB, bgzip {sizes['bgzip']:,.1f} MB + .gzi {gzi:.2f} MB "
        f"({sizes['bgzip'] / sizes['plain']:.4f}x)"
    )
    print(
        f"Genome store: {store_bytes / 1e6:,.0f} MB for {bases / 1e9:.3f} Gb, {store_bytes / ((bases + 1) // 2):.4f}x "
        f"the genome at 4 bits a base; built from plain and from bgzip: {'identical' if same_store else 'DIFFERENT'}"
    )
    print(f"Pairs: {args.pairs}\n")
    print(f"{'step':<28} {'plain s':>9} {'peak MB':>9}   {'bgzip s':>9} {'peak MB':>9}   {'bgzip/plain time, memory'}")
    print(row("build bgzip genome", None, build))
    print(row("decompress to plain", decompress, None))
    print(row("index (.fai, + .gzi)", indexing["plain"], indexing["bgzip"]))
    print(row("genome store", store["plain"], store["bgzip"]))
    for widths in args.widths:
        print(row(f"windows stage {widths.replace(',', '/')} bp", windows[widths, "plain"], windows[widths, "bgzip"]))
    print("\nPeak MB of a plain-genome run counts the pages of the memory-mapped FASTA it touched: page cache,")
    print("shared and reclaimable, and larger when the file was just written (large page-cache folios).")


if __name__ == "__main__":
    main()
