"""Span mode at real scale: TargetFinder's 139,031 pairs on a genome of hg19's size, measured step by step.

The pairs are data/targetfinder-full (four cell lines, every pair as published: spans of
25 kb to 1.9 Mb with 3 kb / 2 kb windows). The genome is the real-data genome (hg19's 24
chromosomes at true length, N except TargetFinder's 200-bp contigs, built by
`synthetic.fragment_genome`): the cost of every step below does not depend on the bases, so
N stands in for the sequence we do not have (`windows.max_n_fraction: 1` keeps every pair).
Each step runs in a fresh process; its wall time and peak resident memory (ru_maxrss, from
os.wait4) are printed:

1. the genome store (`data.encode_genome.build_store`, from the bgzip FASTA): time, memory,
   and its size against hg19 at 4 bits a base;
2. per cell line, the windows stage (3 kb / 2 kb windows, the default max_span of 2.1 Mb,
   chromosome split) and span encoding (`data.spans.encode_span_shards`): pairs kept, time,
   memory, span-shard bytes;
3. the loader: GM12878's training spans through `data.batches.SpanBatches` (the training
   budget of 16,384 tokens a batch) for `--loader-seconds`, without a model: bases a second;
4. one training step (forward, backward, AdamW; one thread) on one span of 200 kb, 1 Mb and
   2 Mb at 4 bp a token (conv_exp, 19-wide filters: the long demo's span model) and at 32 and
   128 bp a token (conv_tower, 11-wide): seconds and peak memory;
5. one epoch of GM12878's training split, and of all four cell lines', extrapolated on this
   CPU: a step's seconds fitted as a + b x (padded bases) over the three spans of step 4, summed
   over the batches the token budget makes of the real training spans.

Usage: python benchmarks/genome_scale_spans.py [--tmp DIR] [--threads 1] [--loader-seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from epiformer.data.batches import token_budget_batches
from epiformer.data.shards import load_split
from epiformer.io.windows_stats import read_windows_stats, windows_stats_path

REPO = Path(__file__).resolve().parents[1]
FULL = REPO / "data" / "targetfinder-full"
FRAGMENTS = REPO / "data" / "targetfinder"
CELLS = ("GM12878", "HUVEC", "HeLa-S3", "IMR90")
SPAN_LENGTHS = (200_000, 1_000_000, 2_000_000)
RESOLUTIONS = {4: ("conv_exp", 19), 32: ("conv_tower", 11), 128: ("conv_tower", 11)}  # patch: (stem, kernel)
MAX_TOKENS = 16_384  # train.max_tokens_per_batch's default

STEPS = {
    "genome": """
import sys
from epiformer.synthetic.fragment_genome import build_fragment_genome
build_fragment_genome(sys.argv[1], sys.argv[2], sys.argv[3])
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
pairs, genome, out = sys.argv[1:4]
build_windows(pairs, genome, WindowSpec(3000, 2000, max_n_fraction=1.0, max_span=2_100_000),
              SplitSpec(val_chromosomes=("chr7", "chr10"), test_chromosomes=("chr8", "chr9")),
              f"{out}/windows.tsv", f"{out}/split_audit.tsv", f"{out}/windows_stats.json")
""",
    "encode": """
import json, sys
from epiformer.data.spans import encode_span_shards
from epiformer.io.files import read_windows
out, store = sys.argv[1:3]
stats = json.load(open(f"{out}/windows_stats.json"))
encode_span_shards(read_windows(f"{out}/windows.tsv"), store, f"{out}/span_shards", flank=0, shard_size=4096,
                   windows_stats=stats)
""",
    "loader": """
import json, sys, time
import numpy as np
from epiformer.data.batches import SpanBatches
from epiformer.data.shards import load_split
shards, seconds = sys.argv[1], float(sys.argv[2])
spans = load_split(shards, "train")
batches = SpanBatches(spans, max_tokens=%d, patch_size=4, shuffle=True, seed=0)
started, bases, count = time.perf_counter(), 0, 0
while time.perf_counter() - started < seconds and count < len(batches):
    batch = batches[count]
    bases += int(batch["span_valid"].shape[0] * batch["span_valid"].shape[1])
    count += 1
print(json.dumps({"bases": bases, "batches": count, "seconds": time.perf_counter() - started}))
"""
    % MAX_TOKENS,
    "step": """
import json, sys, time
import torch
import torch.nn.functional as F
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer
length, patch, kernel, threads = (int(value) for value in sys.argv[1:5])
stem = sys.argv[5]
torch.set_num_threads(threads)
torch.manual_seed(0)
config = ModelConfig(attention="linear", input="span", d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=patch,
                     kernel_size=kernel, stem=stem, pool="max", element_pool=True, dropout=0.0)
model = EPITransformer(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
span = F.one_hot(torch.randint(0, 4, (1, length)), 4).float()
segment = torch.full((1, length), 2)
segment[0, :3000], segment[0, -2000:] = 0, 1
valid = torch.ones(1, length, dtype=torch.bool)
started = time.perf_counter()
loss = F.binary_cross_entropy_with_logits(model(span=span, segment=segment, span_valid=valid), torch.ones(1))
loss.backward()
optimizer.step()
print(json.dumps({"seconds": time.perf_counter() - started}))
""",
}


def run_step(step: str, *args) -> tuple[float, float, str]:
    """(wall seconds, peak resident MB, stdout) of one step in a fresh Python process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", STEPS[step], *map(str, args)], stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"step {step} {args} failed with exit status {process.returncode}")
    return seconds, usage.ru_maxrss / 1024, output


def epoch_seconds(span_lengths: np.ndarray, patch: int, intercept: float, per_base: float) -> float:
    """One epoch's seconds: the token budget's batches of these spans, each a + b x its padded bases."""
    batches = token_budget_batches(span_lengths, MAX_TOKENS, patch)
    padded = sum(len(rows) * int(span_lengths[rows].max()) for rows in batches)
    return len(batches) * intercept + per_base * padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the genome (1.5 GB store, 0.5 GB FASTA)")
    parser.add_argument("--threads", type=int, default=1, help="threads of each training step")
    parser.add_argument("--loader-seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as folder:
        folder = Path(folder)
        genome, store = folder / "hg19.fa.gz", folder / "store"
        run_step("genome", FRAGMENTS / "hg19_fragments.fa.gz", FRAGMENTS / "hg19.chrom.sizes", genome)
        store_step = run_step("store", genome, store)
        store_bytes = sum(path.stat().st_size for path in store.glob("chrom-*.u8"))
        bases = json.loads((store / "manifest.json").read_text())["bases"]
        cells, train_lengths = {}, {}
        for cell in CELLS:
            out = folder / cell
            out.mkdir()
            windows = run_step("windows", FULL / f"{cell}.pairs.csv.gz", genome, out)
            encode = run_step("encode", out, store)
            stats = read_windows_stats(windows_stats_path(out))
            manifest = json.loads((out / "span_shards" / "manifest.json").read_text())
            shard_bytes = sum(path.stat().st_size for path in (out / "span_shards").rglob("*.safetensors"))
            span_bases = sum(entry["bases"] for entry in manifest["shards"])
            cells[cell] = (stats["pairs_in"], stats["pairs_kept"], windows, encode, shard_bytes, span_bases)
            train_lengths[cell] = load_split(out / "span_shards", "train", verify=False).distance
        loader = run_step("loader", folder / "GM12878" / "span_shards", args.loader_seconds)
        loaded = json.loads(loader[2])
        steps = {
            (patch, length): run_step("step", length, patch, kernel, args.threads, stem)
            for patch, (stem, kernel) in RESOLUTIONS.items()
            for length in SPAN_LENGTHS
        }

    print(f"Genome: {bases / 1e9:.3f} Gb (hg19's 24 chromosomes); pairs: {FULL} (TargetFinder, every pair)")
    print(
        f"Genome store: {store_bytes / 1e6:,.0f} MB, {store_bytes / ((bases + 1) // 2):.4f}x the genome at 4 bits a "
        f"base; built in {store_step[0]:.1f} s, peak {store_step[1]:,.0f} MB\n"
    )
    print(f"{'cell line':<10} {'pairs':>8} {'kept':>8} {'windows s':>10} {'MB':>7} {'encode s':>9} {'MB':>7} "
          f"{'shards MB':>10} {'span Gb':>8} {'as stored before, GB':>21}")  # fmt: skip
    for cell, (pairs, kept, windows, encode, shard_bytes, span_bases) in cells.items():
        print(
            f"{cell:<10} {pairs:>8,} {kept:>8,} {windows[0]:>10.1f} {windows[1]:>7,.0f} {encode[0]:>9.1f} "
            f"{encode[1]:>7,.0f} {shard_bytes / 1e6:>10.2f} {span_bases / 1e9:>8.2f} {span_bases / 2e9:>21.2f}"
        )
    total_span = sum(values[5] for values in cells.values())
    print(
        f"all four: spans of {total_span / 1e9:.1f} Gb, which span shards of format 1 stored at "
        f"{total_span / 2e9:.1f} GB ({total_span / 2 / store_bytes:.1f}x the store)\n"
    )
    print(
        f"Loader (GM12878 train spans, {MAX_TOKENS:,} tokens a batch at 4 bp): "
        f"{loaded['bases'] / loaded['seconds'] / 1e6:.1f} M bases/s over {loaded['batches']} batches, "
        f"peak {loader[1]:,.0f} MB\n"
    )
    print(f"One training step on one span, {args.threads} thread(s): seconds (peak MB)")
    print(f"{'bp a token':<26}" + "".join(f"{length / 1e6:>16.1f} Mb" for length in SPAN_LENGTHS))
    fits = {}
    for patch, (stem, kernel) in RESOLUTIONS.items():
        measured = [json.loads(steps[patch, length][2])["seconds"] for length in SPAN_LENGTHS]
        peaks = [steps[patch, length][1] for length in SPAN_LENGTHS]
        cells_text = "".join(f"{seconds:>10.2f} ({peak:>5,.0f})" for seconds, peak in zip(measured, peaks))
        print(f"{f'{patch} ({stem}, k {kernel})':<26}{cells_text}")
        per_base, intercept = np.polyfit(np.array(SPAN_LENGTHS, dtype=float), measured, 1)
        fits[patch] = (max(intercept, 0.0), per_base)
    print("\nOne epoch, extrapolated (a step's seconds = a + b x padded bases, fitted on the three spans above):")
    for patch in RESOLUTIONS:
        gm = epoch_seconds(train_lengths["GM12878"], patch, *fits[patch])
        four = sum(epoch_seconds(lengths, patch, *fits[patch]) for lengths in train_lengths.values())
        print(f"  {patch:>3} bp a token: GM12878 {gm / 3600:7.1f} h, all four {four / 3600:7.1f} h")


if __name__ == "__main__":
    main()
