"""Span mode against fixed-width mode: training tokens/s through the real data path, same total tokens.

Fixed-width mode: window shards (`encode.encode_shards`), `batches.PairBatches` of a fixed
batch size, every pair the same length. Span mode: ragged span shards
(`spans.encode_span_shards`) of log-uniform lengths, batched by length under a token budget
(`batches.SpanBatches`), so batches are padded to their longest span. Both sets hold the same
total number of model tokens, and a fixed-width batch holds as many tokens as the span
budget, so the only differences are the ragged layout, the bucketing and its padding. Each
round trains one pass over each set with the same M7 model settings (forward, backward,
AdamW step, data built in the training process), alternating the two modes so that a busy
machine slows both alike; the median tokens/s of the rounds and their ratio are printed.
The target: span mode at least 80% of fixed-width mode. Usage:
    python benchmarks/span_throughput.py [--rounds 3] [--threads 1] [--tokens 400000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from epiformer.data.batches import PairBatches, SpanBatches, batch_loader
from epiformer.data.encode import encode_shards
from epiformer.data.encode_genome import build_store
from epiformer.data.shards import load_split
from epiformer.data.spans import encode_span_shards
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer, score_batch

MODEL = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=4, kernel_size=12, dropout=0.0)
SPAN_MODEL = ModelConfig(**{**MODEL.to_dict(), "input": "span"})
FIXED_BASES = 4_000  # fixed-width mode: 2,000 + 2,000 bp windows, 1,000 tokens a pair
SPAN_RANGE = (500, 20_000)  # span mode: log-uniform span lengths in bp
FLANK = 8


def write_genome(path: Path, length: int, seed: int = 0) -> None:
    sequence = np.random.default_rng(seed).choice(np.frombuffer(b"ACGT", np.uint8), length).tobytes().decode()
    path.write_text(">chr1\n" + "\n".join(sequence[i : i + 80] for i in range(0, length, 80)) + "\n")


def windows_table(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """A windows.tsv table on chr1, every pair in the train split."""
    frame = pd.DataFrame(rows, columns=["enhancer_start", "enhancer_end", "promoter_start", "promoter_end"])
    frame.insert(0, "pair_id", range(len(frame)))
    frame.insert(1, "label", np.arange(len(frame)) % 2)
    frame.insert(2, "split", "train")
    frame.insert(3, "distance", (frame["promoter_start"] - frame["enhancer_start"]).abs())
    frame["enhancer_chrom"] = frame["promoter_chrom"] = "chr1"
    return frame


def build_data(folder: Path, total_tokens: int, genome_length: int) -> tuple[object, object]:
    """Fixed-width and span shards of about `total_tokens` model tokens each; returns both train splits."""
    rng = np.random.default_rng(1)
    bases = total_tokens * MODEL.patch_size
    half = FIXED_BASES // 2
    starts = rng.integers(FLANK, genome_length - FIXED_BASES - FLANK, bases // FIXED_BASES)
    fixed = windows_table([(s, s + half, s + half, s + FIXED_BASES) for s in starts])
    spans, used = [], 0
    while used < bases:
        length = int(np.exp(rng.uniform(*np.log(SPAN_RANGE))))
        start = int(rng.integers(FLANK, genome_length - length - FLANK))
        spans.append((start, start + 200, start + length - 200, start + length))
        used += length
    stats = {"split_mode": "chromosome", "leak_prone": False}
    encode_shards(fixed, folder / "genome.fa", folder / "fixed", FLANK, 4096, windows_stats=stats)
    build_store(folder / "genome.fa", folder / "genome_store")
    encode_span_shards(
        windows_table(spans), folder / "genome_store", folder / "spans", FLANK, 4096, windows_stats=stats
    )
    return load_split(folder / "fixed", "train"), load_split(folder / "spans", "train")


def train_pass(model_config: ModelConfig, batches) -> tuple[float, int]:
    """Seconds for one training pass over `batches`, and the model tokens it held (padding not counted)."""
    torch.manual_seed(0)
    model = EPITransformer(model_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = 0
    started = time.perf_counter()
    for batch in batch_loader(batches):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            score_batch(model, model.config, batch, torch.device("cpu")), batch["label"]
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if "span" in batch:
            tokens += int(-(-batch["span_valid"].sum(dim=1) // model_config.patch_size).sum())
        else:
            tokens += len(batch["label"]) * FIXED_BASES // model_config.patch_size
    return time.perf_counter() - started, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=400_000, help="model tokens in each set (default 400,000)")
    parser.add_argument("--budget", type=int, default=8_192, help="model tokens a batch (default 8,192)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        write_genome(folder / "genome.fa", 2_000_000)
        fixed, spans = build_data(folder, args.tokens, 2_000_000)
        batch_size = max(1, args.budget * MODEL.patch_size // FIXED_BASES)
        span_batches = SpanBatches(spans, args.budget, MODEL.patch_size, shuffle=True, seed=0, epoch=1)
        padded = sum(len(rows) * int((spans.lengths[rows] - 2 * FLANK).max()) for rows in span_batches.batches)
        print(
            f"{len(fixed)} fixed-width pairs of {FIXED_BASES} bp (batch {batch_size}); {len(spans)} spans of "
            f"{SPAN_RANGE[0]}-{SPAN_RANGE[1]} bp in {len(span_batches)} batches of <= {args.budget} tokens; "
            f"padding {padded / span_batches.bases() - 1:.1%} of the span bases; {args.threads} thread(s)"
        )
        rates = {"fixed": [], "span": []}
        for round_ in range(args.rounds):
            for mode in ("fixed", "span"):
                if mode == "fixed":
                    batches = PairBatches(fixed, batch_size, shuffle=True, seed=0, epoch=round_ + 1)
                    seconds, tokens = train_pass(MODEL, batches)
                else:
                    batches = SpanBatches(spans, args.budget, MODEL.patch_size, shuffle=True, seed=0, epoch=round_ + 1)
                    seconds, tokens = train_pass(SPAN_MODEL, batches)
                rates[mode].append(tokens / seconds)
                print(
                    f"round {round_ + 1} {mode:5s}: {tokens} tokens in {seconds:.2f} s, "
                    f"{tokens / seconds:,.0f} tokens/s"
                )
    fixed_rate, span_rate = statistics.median(rates["fixed"]), statistics.median(rates["span"])
    print(f"median tokens/s: fixed-width {fixed_rate:,.0f}, span {span_rate:,.0f}")
    print(f"span / fixed-width: {span_rate / fixed_rate:.2f} (target >= 0.80)")


if __name__ == "__main__":
    main()
