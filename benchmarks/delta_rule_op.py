"""The delta rules against ELU+1 linear attention and softmax (SDPA): one thread, forward + backward, by length.

Side by side in one run, for each length (batch 1, 4 heads, head size `--dim`), on the same
q, k, v (and beta, decay), each variant's forward + backward through `torch.autograd.grad`:
- `linear`: M7's ELU+1 linear attention (`model.ops.linear_attention`);
- `softmax`: `scaled_dot_product_attention` (PyTorch's CPU kernels), up to `--softmax-max` tokens:
  its time grows with T^2 (at 100k tokens a forward + backward is ~10^13 multiply-adds);
- `deltanet`, `gated_deltanet`: the causal scans (`model.delta_rule`), chunks of `delta_rule.CHUNK` (32) tokens;
- `deltanet both ways`, `gated_deltanet both ways`: what the model runs (`bidirectional_delta_rule`);
- `... (C++)`: the same, token by token in C++ (`EPIFORMER_DELTA_KERNEL=cpp`, `model.delta_rule_kernel`),
  where the extension builds here (its first build, ~40 s, happens before the timing).
Times are medians of repeats after a warm-up, variants interleaved so that a busy machine
slows them alike, in CPU time of the one thread (`time.thread_time`). Then µs per token: a
constant column is a cost linear in T. Usage:

    python benchmarks/delta_rule_op.py [--lengths 1000 4000 16000 100000] [--dim 16] [--quick] [--out TSV]
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from attention_op import median_times, print_aligned

from epiformer.model import delta_rule_kernel
from epiformer.model.delta_rule import KERNEL_VARIABLE, bidirectional_delta_rule, delta_rule, gated_delta_rule
from epiformer.model.ops import linear_attention

HEADS = 4


def variants(length: int, dim: int, softmax_max: int) -> dict:
    """name -> a function running forward + backward once, all on the same numbers."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, length, dim, generator=generator).requires_grad_() for _ in range(3))
    beta = torch.rand(1, HEADS, length, generator=generator).requires_grad_()
    decay = (torch.rand(1, HEADS, length, generator=generator) * 0.1 + 0.9).requires_grad_()
    upstream = torch.randn(1, HEADS, length, dim, generator=generator)

    def run(function, *extra, kernel="torch"):
        inputs = (q, k, v, *extra)

        def forward_backward():
            with scan_kernel(kernel):
                return torch.autograd.grad(function(*inputs), inputs, upstream)

        return forward_backward

    runs = {"linear": run(linear_attention)}
    if length <= softmax_max:
        runs["softmax"] = run(F.scaled_dot_product_attention)
    runs["deltanet"] = run(delta_rule, beta)
    runs["gated_deltanet"] = run(gated_delta_rule, beta, decay)
    runs["deltanet both ways"] = run(bidirectional_delta_rule, beta)
    runs["gated_deltanet both ways"] = run(bidirectional_delta_rule, beta, decay)
    if delta_rule_kernel.available():
        runs["deltanet both ways (C++)"] = run(bidirectional_delta_rule, beta, kernel="cpp")
        runs["gated_deltanet both ways (C++)"] = run(bidirectional_delta_rule, beta, decay, kernel="cpp")
    return runs


@contextlib.contextmanager
def scan_kernel(kernel: str):
    """EPIFORMER_DELTA_KERNEL set to `kernel` for the calls within, as it was after."""
    before = os.environ.get(KERNEL_VARIABLE)
    os.environ[KERNEL_VARIABLE] = kernel
    try:
        yield
    finally:
        if before is None:
            del os.environ[KERNEL_VARIABLE]
        else:
            os.environ[KERNEL_VARIABLE] = before


def time_length(length: int, dim: int, softmax_max: int, repeats: int) -> dict:
    return median_times(variants(length, dim, softmax_max), repeats)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 4000, 16_000, 100_000])
    parser.add_argument("--dim", type=int, default=16, help="head size (4 heads)")
    parser.add_argument("--softmax-max", type=int, default=16_000, help="longest length softmax runs at")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1k and 4k tokens, 3 repeats")
    parser.add_argument("--no-softmax", action="store_true", help="leave softmax out (its T^2 dominates the run)")
    parser.add_argument(
        "--out", type=Path, help="also write the medians to this TSV (rows of other head sizes there are kept)"
    )
    args = parser.parse_args(argv)
    if args.no_softmax:
        args.softmax_max = 0
    lengths, repeats = ([1000, 4000], 3) if args.quick else (args.lengths, args.repeats)
    torch.set_num_threads(1)
    rows = [(length, time_length(length, args.dim, args.softmax_max, repeats)) for length in lengths]
    names = list(rows[0][1])
    print(f"forward + backward, 1 thread, batch 1, {HEADS} heads of {args.dim}; ms, median of {repeats}")
    print_aligned([["T", *names]] + [[length, *(_ms(times.get(n)) for n in names)] for length, times in rows])
    print("\nµs per token (constant down a column: linear in T); ratio to linear attention at the same T")
    table = [["T", *names, *(f"{n} / linear" for n in names[1:])]]
    for length, times in rows:
        per_token = [_ms(times[n] * 1e3 / length) if n in times else "" for n in names]
        ratios = [f"{times[n] / times['linear']:.1f}" if n in times else "" for n in names[1:]]
        table.append([length, *per_token, *ratios])
    print_aligned(table)
    if args.out:
        write_medians(args.out, args.dim, rows)


def write_medians(path: Path, dim: int, rows) -> None:
    """head_size, T, variant, ms, ratio to linear: one row per variant and length (docs/results/write_tables.py's
    `delta_op` table reads it), replacing the rows of this head size that `path` held."""
    table = pd.DataFrame(
        [
            {"head_size": dim, "T": length, "variant": name, "ms": ms, "ratio_to_linear": ms / times["linear"]}
            for length, times in rows
            for name, ms in times.items()
        ]
    )
    if path.exists():
        table = pd.concat([pd.read_csv(path, sep="\t").query("head_size != @dim"), table])
    table.sort_values(["head_size", "T"], kind="stable").to_csv(path, sep="\t", index=False, float_format="%.4g")


def _ms(value) -> str:
    return "" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
