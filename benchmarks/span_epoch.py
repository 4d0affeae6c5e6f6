"""Span training time per epoch, linear (M7) against softmax, as the longest span grows.

For each longest span (default 5k, 20k and 50k tokens), an epoch is `--spans` spans whose
lengths are log-uniform between a tenth of the longest and the longest (which is always
one of them), batched as training batches them (`batches.token_budget_batches`, a budget
of the longest span, so it trains alone), through the model that config/demo_long.yaml
trains (d_model 32, 2 layers, 4 heads, d_ff 64) at one token per base. Each (attention,
length) point runs in a fresh process, one thread, under a memory limit (`--memory-gb`,
as `ulimit -v`) and a time limit (`--time-limit`): a point that exceeds either is reported
as such, measured, not extrapolated. Printed: seconds per epoch, the process's peak memory,
and softmax / linear ratios. Usage:
    python benchmarks/span_epoch.py [--lengths 5000 20000 50000] [--spans 6] [--memory-gb 16]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import torch

from epiformer.constants import SEGMENT_IDS
from epiformer.data.batches import token_budget_batches
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer

MODEL = dict(d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=1, kernel_size=1, dropout=0.0, input="span")


def span_lengths(longest: int, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(longest / 10), np.log(longest), count - 1)).astype(int)
    return np.append(lengths, longest)


def random_batch(lengths: np.ndarray, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One-hot spans padded to the longest, enhancer | between | promoter segments of 256 bases at each end."""
    longest = int(lengths.max())
    span = torch.nn.functional.one_hot(torch.randint(0, 4, (len(lengths), longest), generator=generator), 4).float()
    valid = torch.arange(longest)[None, :] < torch.as_tensor(lengths)[:, None]
    segment = torch.full((len(lengths), longest), SEGMENT_IDS["between"])
    for row, length in enumerate(lengths):
        segment[row, : min(256, length)] = SEGMENT_IDS["enhancer"]
        segment[row, max(0, length - 256) : length] = SEGMENT_IDS["promoter"]
    return {"span": span * valid[..., None], "segment": segment, "span_valid": valid}


def epoch_point(attention: str, longest: int, spans: int) -> dict:
    """Seconds of one training epoch (forward, backward, AdamW step per batch) in this process."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = EPITransformer(ModelConfig(attention=attention, **MODEL))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    lengths = span_lengths(longest, spans)
    generator = torch.Generator().manual_seed(0)
    started = time.perf_counter()
    for rows in token_budget_batches(lengths, longest):
        batch = random_batch(lengths[rows], generator)
        loss = model(**batch).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "tokens": int(lengths.sum()),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_point(attention: str, longest: int, spans: int, memory_gb: float, time_limit: float) -> dict:
    """epoch_point in a fresh process under the memory and time limits; a breach is reported, not raised."""
    limit = int(memory_gb * 2**30)
    command = [sys.executable, __file__, "--point", attention, str(longest), "--spans", str(spans)]
    try:
        out = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=time_limit,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
        )
    except subprocess.TimeoutExpired:
        return {"status": f"over the {time_limit:.0f} s time limit"}
    if out.returncode != 0:
        memory = "out of memory" if "memory" in out.stderr.lower() or "alloc" in out.stderr.lower() else "failed"
        return {"status": f"{memory} (limit {memory_gb:g} GB): {out.stderr.strip().splitlines()[-1][:120]}"}
    return {"status": "ok", **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[5_000, 20_000, 50_000])
    parser.add_argument("--spans", type=int, default=6, help="spans per epoch (default 6)")
    parser.add_argument("--memory-gb", type=float, default=16.0)
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds per point (default 900)")
    parser.add_argument("--point", nargs=2, metavar=("ATTENTION", "LONGEST"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        print(json.dumps(epoch_point(args.point[0], int(args.point[1]), args.spans)))
        return
    print(f"{args.spans} spans an epoch, one thread, {args.memory_gb:g} GB and {args.time_limit:.0f} s per point")
    print(f"{'longest':>8} {'attention':>9} {'s/epoch':>9} {'peak MB':>8}  status")
    for longest in args.lengths:
        points = {}
        for attention in ("linear", "softmax"):
            points[attention] = run_point(attention, longest, args.spans, args.memory_gb, args.time_limit)
            point = points[attention]
            seconds = f"{point['seconds']:9.2f}" if "seconds" in point else f"{'-':>9}"
            peak = f"{point['peak_mb']:8.0f}" if "peak_mb" in point else f"{'-':>8}"
            print(f"{longest:>8} {attention:>9} {seconds} {peak}  {point['status']}", flush=True)
        if all(p["status"] == "ok" for p in points.values()):
            print(
                f"{longest:>8} softmax/linear: time x{points['softmax']['seconds'] / points['linear']['seconds']:.1f}, "
                f"peak memory x{points['softmax']['peak_mb'] / points['linear']['peak_mb']:.1f}"
            )


if __name__ == "__main__":
    main()
