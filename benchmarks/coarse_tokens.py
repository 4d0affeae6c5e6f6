"""Training throughput per base at 4, 32 and 128 bp a token: the conv stems against the conv tower, side by side.

One training step (forward, backward, AdamW) of config/demo_long.yaml's span model size
(d_model 32, 2 layers, 4 heads, d_ff 64, max pool, element pools) on one span of `--length`
bases (262,144: a real enhancer-promoter distance), one thread, for each stem and resolution:

- 4 bp a token, `conv_exp` with 19-wide filters: the long demo's span model, the reference;
- 4 bp a token, M7's `linear` stem, for scale;
- 32 and 128 bp a token by `conv_exp` with filters as wide as the patch (what reached a coarse
  token before: its cost grows with the patch);
- 32 and 128 bp a token by `conv_exp` with 19-wide filters (a CTCF site), pooled by max and by
  `patch_pool: softmax` (each patch's responses computed a few bases at a time, `RESPONSE_BLOCK`);
- 32 and 128 bp a token by `conv_tower` (11-wide exp filters pooled over 8 bp, then stages of
  convolution and pooling);
- 128 bp softmax-pooled again with its backward pass computing each chunk's responses anew
  (`FUSED_POOL_KEPT` 0) instead of reading those its forward pass kept: the saving of keeping them;
- 128 bp softmax-pooled again with its responses multiplied out (`LOOKUP_RESPONSES` off) rather than
  looked up in a table of the filters' sums (`model.onehot_lookup`): the saving of the look-up.

Every model is built once and the cases run in rounds, one step each a round, so that a
busy machine slows all alike. Printed: each case's median seconds a step, million bases a
second, and its throughput over the reference's. Usage:
    python benchmarks/coarse_tokens.py [--length 262144] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import epiformer.model.transformer as transformer
from epiformer.constants import SEGMENT_IDS
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer

REFERENCE = "4 bp, conv_exp (k 19)"
CASES = {  # name: (patch_size, stem, kernel_size, patch_pool)
    REFERENCE: (4, "conv_exp", 19, "max"),
    "4 bp, linear (M7, k 8)": (4, "linear", 8, "max"),
    "32 bp, conv_exp (k 32)": (32, "conv_exp", 32, "max"),
    "128 bp, conv_exp (k 128)": (128, "conv_exp", 128, "max"),
    "32 bp, conv_exp (k 19)": (32, "conv_exp", 19, "max"),
    "128 bp, conv_exp (k 19)": (128, "conv_exp", 19, "max"),
    "32 bp, conv_exp softmax (k 19)": (32, "conv_exp", 19, "softmax"),
    "128 bp, conv_exp softmax (k 19)": (128, "conv_exp", 19, "softmax"),
    "32 bp, conv_tower (k 11)": (32, "conv_tower", 11, "max"),
    "128 bp, conv_tower (k 11)": (128, "conv_tower", 11, "max"),
    "128 bp, softmax, recomputed": (128, "conv_exp", 19, "softmax"),
    "128 bp, softmax, multiplied": (128, "conv_exp", 19, "softmax"),
}
RECOMPUTED = {"128 bp, softmax, recomputed": "128 bp, conv_exp softmax (k 19)"}  # case: the same model, kept
MULTIPLIED = {"128 bp, softmax, multiplied": "128 bp, conv_exp softmax (k 19)"}  # case: the same model, looked up
TARGETS = {32: 4.0, 128: 8.0}  # issue 26: the tower's throughput a base over the reference's


def span_model(patch: int, stem: str, kernel: int, patch_pool: str) -> EPITransformer:
    torch.manual_seed(0)
    config = ModelConfig(
        attention="linear", input="span", d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=patch,
        kernel_size=kernel, stem=stem, pool="max", element_pool=True, dropout=0.0, patch_pool=patch_pool,
    )  # fmt: skip
    return EPITransformer(config).train()


def one_span(length: int) -> dict[str, torch.Tensor]:
    """A random span of `length` bases, its first 3 kb the enhancer and its last 2 kb the promoter."""
    bases = torch.randint(0, 4, (1, length), generator=torch.Generator().manual_seed(0))
    segment = torch.full((1, length), SEGMENT_IDS["between"])
    segment[0, :3000], segment[0, -2000:] = SEGMENT_IDS["enhancer"], SEGMENT_IDS["promoter"]
    return {"span": F.one_hot(bases, 4).float(), "segment": segment, "span_valid": torch.ones(1, length, dtype=bool)}


def step_seconds(model: EPITransformer, optimizer, batch: dict, keep: bool = True, lookup: bool = True) -> float:
    kept, transformer.FUSED_POOL_KEPT = transformer.FUSED_POOL_KEPT, transformer.FUSED_POOL_KEPT if keep else 0
    looks_up, transformer.LOOKUP_RESPONSES = transformer.LOOKUP_RESPONSES, lookup
    try:
        started = time.perf_counter()
        loss = F.binary_cross_entropy_with_logits(model(**batch), torch.ones(1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started
    finally:
        transformer.FUSED_POOL_KEPT, transformer.LOOKUP_RESPONSES = kept, looks_up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=262_144)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    batch = one_span(args.length)
    models = {name: span_model(*case) for name, case in CASES.items()}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-3) for name, model in models.items()}
    for name, model in models.items():  # warm-up: allocator and kernels, not timed
        step_seconds(model, optimizers[name], batch, keep=name not in RECOMPUTED, lookup=name not in MULTIPLIED)
    seconds = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, model in models.items():
            seconds[name].append(
                step_seconds(model, optimizers[name], batch, keep=name not in RECOMPUTED, lookup=name not in MULTIPLIED)
            )
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"one training step on one {args.length:,}-bp span, {args.threads} thread(s), median of {args.rounds} rounds")
    print(f"{'stem':32s} {'s a step':>9s} {'M bases/s':>10s} {'x reference':>12s}")
    for name in CASES:
        ratio = medians[REFERENCE] / medians[name]
        patch, stem, _, _ = CASES[name]
        target = f"  (target {TARGETS[patch]:.0f}x)" if stem == "conv_tower" else ""
        print(f"{name:32s} {medians[name]:9.3f} {args.length / medians[name] / 1e6:10.2f} {ratio:11.2f}x{target}")
    for recomputed, kept in RECOMPUTED.items():
        print(f"{kept}: a step with the responses kept takes {medians[kept] / medians[recomputed]:.2f}x recomputed")
    for multiplied, looked_up in MULTIPLIED.items():
        print(f"{looked_up}: a step with the responses looked up takes {medians[looked_up] / medians[multiplied]:.2f}x")


if __name__ == "__main__":
    main()
