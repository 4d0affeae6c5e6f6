"""Training pace of the long demo's span model with each attention: ELU+1 (M7) against the delta rules, side by side.

One training step (forward, backward, AdamW) of config/demo_long.yaml's span model (d_model 32,
2 layers, 4 heads of 8, 4 bp tokens, the 19-wide exp stem, max pool, element pools) on a
batch as its training takes them (`train.max_tokens_per_batch` 16,384 tokens: 4 spans of
16 kb, the enhancer the first 1 kb of each and the promoter the last), one thread, for:

- `linear`: M7's ELU+1 linear attention, the reference;
- `deltanet`, `gated_deltanet`: the delta rules by the chunked PyTorch scan (the default);
- `deltanet (C++)`, `gated_deltanet (C++)`: the same models with `EPIFORMER_DELTA_KERNEL=cpp`
  (`model.delta_rule_kernel`), where it builds here.

Models are built once and the cases run in rounds, one step each a round, so that a busy
machine slows all alike. Printed: each case's median seconds a step, training tokens a second
and its pace against M7's (issue 40's target: at least 1/3). Usage:
    python benchmarks/delta_rule_training.py [--rounds 5] [--spans 4] [--span-length 16384] [--out TSV]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from delta_rule_op import scan_kernel

from epiformer.constants import SEGMENT_IDS
from epiformer.model import delta_rule_kernel
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer

REFERENCE = "linear"
TARGET = 1 / 3  # issue 40: a delta-rule span model trains at least a third of M7's tokens a second
PATCH = 4


def cases() -> dict[str, tuple[str, str]]:
    """name -> (attention, EPIFORMER_DELTA_KERNEL)."""
    found = {
        REFERENCE: ("linear", "torch"),
        "deltanet": ("deltanet", "torch"),
        "gated_deltanet": ("gated_deltanet", "torch"),
    }
    if delta_rule_kernel.available():
        found |= {"deltanet (C++)": ("deltanet", "cpp"), "gated_deltanet (C++)": ("gated_deltanet", "cpp")}
    return found


def span_model(attention: str) -> EPITransformer:
    torch.manual_seed(0)
    config = ModelConfig(
        attention=attention, input="span", d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=PATCH,
        kernel_size=19, stem="conv_exp", pool="max", element_pool=True, dropout=0.0,
    )  # fmt: skip
    return EPITransformer(config).train()


def span_batch(spans: int, length: int) -> dict[str, torch.Tensor]:
    bases = torch.randint(0, 4, (spans, length), generator=torch.Generator().manual_seed(0))
    segment = torch.full((spans, length), SEGMENT_IDS["between"])
    segment[:, :1000], segment[:, -1000:] = SEGMENT_IDS["enhancer"], SEGMENT_IDS["promoter"]
    valid = torch.ones(spans, length, dtype=bool)
    return {"span": F.one_hot(bases, 4).float(), "segment": segment, "span_valid": valid}


def step_seconds(model: EPITransformer, optimizer, batch: dict, kernel: str) -> float:
    with scan_kernel(kernel):
        started = time.perf_counter()
        logits = model(**batch)
        F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spans", type=int, default=4)
    parser.add_argument("--span-length", type=int, default=16_384, help="bases a span")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the medians to this TSV (write_tables' delta_pace)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    batch = span_batch(args.spans, args.span_length)
    runs = cases()
    models = {name: span_model(attention) for name, (attention, _) in runs.items()}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-3) for name, model in models.items()}
    for name, model in models.items():  # warm-up: allocator, kernels, the C++ build
        step_seconds(model, optimizers[name], batch, runs[name][1])
    seconds = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, model in models.items():
            seconds[name].append(step_seconds(model, optimizers[name], batch, runs[name][1]))
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    tokens = args.spans * args.span_length // PATCH
    print(
        f"one training step of the long demo's span model, {args.spans} spans of {args.span_length:,} bases "
        f"({tokens:,} tokens), {args.threads} thread(s), median of {args.rounds} rounds"
    )
    print(f"{'attention':24s} {'s a step':>9s} {'tokens/s':>9s} {'x M7':>6s}")
    for name in runs:
        pace = medians[REFERENCE] / medians[name]
        mark = "" if name == REFERENCE else f"  (target {TARGET:.2f}: {'met' if pace >= TARGET else 'missed'})"
        print(f"{name:24s} {medians[name]:9.3f} {tokens / medians[name]:9,.0f} {pace:6.2f}{mark}")
    if args.out:
        rows = [
            {"attention": attention, "scan": kernel, "seconds_a_step": medians[name],
             "tokens_per_s": tokens / medians[name], "pace_against_m7": medians[REFERENCE] / medians[name]}
            for name, (attention, kernel) in runs.items()
        ]  # fmt: skip
        pd.DataFrame(rows).to_csv(args.out, sep="\t", index=False, float_format="%.4g")


if __name__ == "__main__":
    main()
