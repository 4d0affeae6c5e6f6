"""Training throughput on this machine: tokens/s and achieved FLOP/s against the matmul rate.

For two configurations — the demo (256 + 224 bp, 4-bp patches, batch 32) and the default
for real data (3 kb + 2 kb, one token per base, batch 16) — times optimiser steps of the
linear model on random one-hot batches (the data pipeline is measured separately in
benchmarks/shards.py), counts the matrix-multiply FLOPs of a step, and divides by the fp32
matmul rate measured in the same run with the same threads. Usage:
    python benchmarks/training_throughput.py [--threads 2] [--steps 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from epiformer.model import EPITransformer, ModelConfig

CONFIGS = {
    "demo (256+224 bp, patch 4, batch 32)": (256, 224, 32, dict(patch_size=4, kernel_size=12)),
    "default (3000+2000 bp, patch 1, batch 16)": (3000, 2000, 16, dict(patch_size=1, kernel_size=1)),
}


def matmul_flops_per_second(size: int = 1024, repeats: int = 20) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - started)


def step_flops(config: ModelConfig, tokens: int, bases: int, batch: int) -> float:
    """Multiply-add FLOPs of forward + backward (3x forward) for one batch."""
    d, heads = config.d_model, config.n_heads
    head_dim = d // heads
    per_token_per_layer = 2 * (4 * d * d + 2 * d * config.d_ff)  # q, k, v, out projections and feed-forward
    per_token_per_layer += 2 * 2 * d * (head_dim + 1)  # phi(k)^T [v 1] and phi(q) kv
    forward = batch * (tokens * config.n_layers * per_token_per_layer + 2 * bases / config.patch_size * 4 *
                       config.kernel_size * d + 2 * d * d)  # fmt: skip
    return 3 * forward


def measure(name: str, steps: int) -> None:
    enhancer_width, promoter_width, batch, patching = CONFIGS[name]
    config = ModelConfig(attention="linear", d_model=64, n_layers=2, n_heads=4, d_ff=128, dropout=0.0, **patching)
    model = EPITransformer(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    batch_tensors = [torch.nn.functional.one_hot(torch.randint(0, 4, (batch, w), generator=generator), 4).float()
                     for w in (enhancer_width, promoter_width)]  # fmt: skip
    labels = (torch.rand(batch, generator=generator) < 0.25).float()
    times = []
    for _ in range(steps + 2):
        started = time.perf_counter()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(*batch_tensors), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times[2:])
    tokens = sum(-(-w // config.patch_size) for w in (enhancer_width, promoter_width))
    flops = step_flops(config, tokens, enhancer_width + promoter_width, batch) / seconds
    peak = matmul_flops_per_second()
    print(f"{name}: {batch * tokens / seconds:,.0f} tokens/s, {batch / seconds:,.0f} pairs/s, "
          f"{flops / 1e9:.1f} GFLOP/s = {flops / peak:.0%} of the {peak / 1e9:.0f} GFLOP/s fp32 matmul rate")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.threads} thread(s), linear model d_model 64, 2 layers")
    for name in CONFIGS:
        measure(name, args.steps)


if __name__ == "__main__":
    main()
