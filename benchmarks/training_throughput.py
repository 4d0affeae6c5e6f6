"""Training throughput on this machine: tokens/s and achieved FLOP/s against the matmul rate.

Three configurations of the linear model (M7), each eager and under `torch.compile`
(`train.compile: true`):
- demo: 256 + 224 bp, 4-bp patches (kernel 12), d_model 64, d_ff 128, batch 32 (config/config.yaml);
- default: 3 kb + 2 kb windows with the ModelConfig defaults, the model config/README.md
  recommends for real data (d_model 128, 4 layers, 8 heads, d_ff 512, 10-bp patches with
  kernel 20: 500 tokens per pair), batch 64;
- one token per base: 3 kb + 2 kb, patch 1, d_model 64, 2 layers, d_ff 256, batch 16
  (5,000 tokens per pair: the configuration the issue's orientation figures used).
Each round times one optimiser step of every variant on random one-hot batches (the data
pipeline is measured separately in benchmarks/shards.py: ~100x faster than training) and,
right after, the fp32 matmul rate with the same threads, so that a busy machine slows both
sides of each ratio alike; medians over rounds are printed. FLOPs counted: the matrix
multiplies of forward + backward (3 x forward). Usage:
    python benchmarks/training_throughput.py [--threads 2] [--rounds 8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from epiformer.model.transformer import EPITransformer, ModelConfig

CONFIGS = {
    "demo (256+224 bp, d_model 64, d_ff 128, patch 4, batch 32)": (
        256,
        224,
        32,
        dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, patch_size=4, kernel_size=12),
    ),
    "default (3000+2000 bp, ModelConfig defaults: d_model 128, 4 layers, patch 10, batch 64)": (3000, 2000, 64, {}),
    "one token per base (3000+2000 bp, d_model 64, d_ff 256, patch 1, batch 16)": (
        3000,
        2000,
        16,
        dict(d_model=64, n_layers=2, n_heads=4, d_ff=256, patch_size=1, kernel_size=1),
    ),
}


def matmul_flops_per_second(size: int = 1024, repeats: int = 10) -> float:
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
    per_token_per_layer += 2 * 2 * d * (head_dim + 1)  # phi(k)^T [v 1] and phi(q) kv, per head
    forward = batch * (
        tokens * config.n_layers * per_token_per_layer
        + 2 * bases / config.patch_size * 4 * config.kernel_size * d
        + 2 * d * d
    )
    return 3 * forward


class Variant:
    """One configuration, eager or compiled, with its own model, optimiser and batch."""

    def __init__(self, name: str, compiled: bool):
        enhancer_width, promoter_width, batch, overrides = CONFIGS[name]
        self.name = f"{name}, {'compiled' if compiled else 'eager'}"
        self.config = ModelConfig(attention="linear", dropout=0.0, **overrides)
        model = EPITransformer(self.config)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.model = torch.compile(model) if compiled else model
        generator = torch.Generator().manual_seed(0)
        self.inputs = [
            torch.nn.functional.one_hot(torch.randint(0, 4, (batch, w), generator=generator), 4).float()
            for w in (enhancer_width, promoter_width)
        ]
        self.labels = (torch.rand(batch, generator=generator) < 0.25).float()
        self.tokens = batch * sum(-(-w // self.config.patch_size) for w in (enhancer_width, promoter_width))
        self.flops = step_flops(self.config, self.tokens // batch, enhancer_width + promoter_width, batch)
        self.seconds: list[float] = []
        self.ratios: list[float] = []

    def step(self) -> float:
        started = time.perf_counter()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self.model(*self.inputs), self.labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variants = [Variant(name, compiled) for name in CONFIGS for compiled in (False, True)]
    for variant in variants:  # warm-up; compiling takes a while
        variant.step(), variant.step()
    peaks = []
    for _ in range(args.rounds):
        for variant in variants:
            seconds = variant.step()
            peak = matmul_flops_per_second()
            variant.seconds.append(seconds)
            variant.ratios.append(variant.flops / seconds / peak)
            peaks.append(peak)
    print(
        f"{args.threads} thread(s), linear attention (M7), median of {args.rounds} rounds; "
        f"fp32 matmul rate {statistics.median(peaks) / 1e9:.0f} GFLOP/s"
    )
    for variant in variants:
        seconds = statistics.median(variant.seconds)
        print(
            f"{variant.name}: {variant.tokens / seconds:,.0f} tokens/s, {variant.flops / seconds / 1e9:.1f} "
            f"GFLOP/s = {statistics.median(variant.ratios):.0%} of the matmul rate"
        )


if __name__ == "__main__":
    main()
