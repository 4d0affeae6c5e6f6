"""Shard encoding and loading speed, measured side by side in one run.

(a) One-hot encoding (table lookup + bit packing) in MB of sequence per second, against a
    plain memory copy of the same bytes.
(b) The training loader (memory-mapped shards, unpacking, shift and reverse-complement
    augmentation) in pairs per second, against what training the demo's linear model
    consumes on this machine.
(c) The loader's anonymous memory (RssAnon) after reading a split of 8 and of 64 shards:
    it should not grow with the number of shards.
Usage: python benchmarks/shards.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from epiformer.constants import ALPHABET, SHARD_FORMAT
from epiformer.data.batches import PairBatches, batch_loader
from epiformer.data.encode import write_shard
from epiformer.data.shards import load_split
from epiformer.model.transformer import EPITransformer, ModelConfig
from epiformer.sequence.onehot import one_hot, pack_codes, pack_one_hot

WIDTHS, FLANK = {"enhancer": 256, "promoter": 224}, 8
DEMO_MODEL = ModelConfig(
    attention="linear", d_model=64, n_layers=2, n_heads=4, d_ff=128, patch_size=4, kernel_size=12, dropout=0.0
)


def median_seconds(function, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def encoding_versus_memcpy(megabytes: int = 64) -> None:
    codes = np.frombuffer(b"ACGTN", np.uint8)[np.random.default_rng(0).integers(0, 5, megabytes << 20)]
    rows = codes.reshape(-1, 4096)
    target = np.empty_like(codes)
    copy = median_seconds(lambda: np.copyto(target, codes))
    table = median_seconds(lambda: pack_codes(rows), repeats=3)
    naive = median_seconds(lambda: pack_one_hot(one_hot(rows)), repeats=3)
    print(
        f"(a) memory copy {megabytes / copy:,.0f} MB/s; encoding (pair-table lookup) {megabytes / table:,.0f} MB/s "
        f"of sequence = {copy / table:.1%} of memory-copy speed (one-hot then packbits: {copy / naive:.1%})"
    )


def write_random_shards(folder: Path, shards: int, rows: int) -> None:
    rng = np.random.default_rng(1)
    lengths = {e: w + 2 * FLANK for e, w in WIDTHS.items()}
    entries = []
    for number in range(shards):
        tensors = {
            e: pack_one_hot(one_hot(np.frombuffer(ALPHABET.encode(), np.uint8)[rng.integers(0, 4, (rows, n))]))
            for e, n in lengths.items()
        }
        tensors["label"] = (rng.random(rows) < 0.25).astype(np.uint8)
        tensors["pair_id"] = np.arange(number * rows, (number + 1) * rows, dtype=np.int64)
        tensors["distance"] = rng.integers(1_000, 1_000_000, rows, dtype=np.int64)
        relative = f"train/shard-{number:05d}.safetensors"
        (folder / "train").mkdir(parents=True, exist_ok=True)
        entries.append(
            {
                "path": relative,
                "split": "train",
                "rows": rows,
                "positives": int(tensors["label"].sum()),
                "sha256": write_shard(folder / relative, tensors),
            }
        )
    manifest = {
        "format_version": SHARD_FORMAT,
        "windows": {f"{element}_width": width for element, width in WIDTHS.items()},
        "flank": FLANK,
        "split": {"mode": "chromosome", "leak_prone": False},
        "shards": entries,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def epoch_pairs_per_second(shards, workers: int) -> float:
    batches = PairBatches(shards, 32, shuffle=True, seed=0, epoch=1, max_shift=FLANK, reverse_complement_prob=0.5)
    started = time.perf_counter()
    count = sum(len(batch["label"]) for batch in batch_loader(batches, workers))
    return count / (time.perf_counter() - started)


def training_pairs_per_second(shards, steps: int = 30) -> float:
    torch.set_num_threads(1)  # as the demo's training jobs run
    model = EPITransformer(DEMO_MODEL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [PairBatches(shards, 32, shuffle=True, seed=0, epoch=1)[i] for i in range(steps)]
    started = time.perf_counter()
    for batch in batches:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(batch["enhancer"], batch["promoter"]), batch["label"]
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return steps * 32 / (time.perf_counter() - started)


MEMORY_PROBE = """
import sys
from epiformer.data.batches import PairBatches, batch_loader
from epiformer.data.shards import load_split
shards = load_split(sys.argv[1], "train")
for batch in batch_loader(PairBatches(shards, 64, shuffle=True, seed=0, epoch=1, max_shift=8)):
    pass
status = open("/proc/self/status").read()
print(int(next(line.split()[1] for line in status.splitlines() if line.startswith("RssAnon"))) / 1024)
"""


def loader_memory(folder: Path) -> float:
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(folder)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    encoding_versus_memcpy()
    with tempfile.TemporaryDirectory() as folder:
        write_random_shards(Path(folder) / "a", shards=8, rows=1024)
        shards = load_split(Path(folder) / "a", "train")
        loader = {w: epoch_pairs_per_second(shards, w) for w in (0, 2)}
        training = training_pairs_per_second(shards)
        print(
            f"(b) loader {loader[0]:,.0f} pairs/s in process, {loader[2]:,.0f} with 2 workers; training consumes "
            f"{training:,.0f} pairs/s; loader / training = {loader[0] / training:.1f}x"
        )
        write_random_shards(Path(folder) / "b", shards=64, rows=1024)
        small, large = loader_memory(Path(folder) / "a"), loader_memory(Path(folder) / "b")
        print(
            f"(c) loader RssAnon after a full pass: {small:,.0f} MB with 8 shards, {large:,.0f} MB with 64 shards "
            f"(x{large / small:.2f} for 8x the data)"
        )


if __name__ == "__main__":
    main()
