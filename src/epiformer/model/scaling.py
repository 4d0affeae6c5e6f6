"""How M7 and the softmax Transformer scale with sequence length: time and peak memory.

Each measurement is one forward + backward pass at batch size 1 of a *component*:

- `attention`: the pure attention function on q, k, v of shape [1, H, T, D/H];
- `model`: the whole model (patch size 1, so T tokens = T bases, half enhancer, half promoter);
- `projections`: the same model with attention replaced by the identity (its Q/K/V and
  output projections, feed-forward, norms and embeddings only), the floor the model's cost
  cannot go below.

On the CPU each point runs in a fresh process, and its peak memory is the rise of the
process's resident set during the pass over what it held before (the kernel's peak mark,
VmHWM, is reset just before the pass); on CUDA it is
`torch.cuda.max_memory_allocated`. Times are medians over `repeats` passes after a warm-up pass,
or that first pass alone when `repeats` is 0 (softmax past 20k tokens, where one pass takes
minutes and start-up costs are negligible beside it).
The table has columns component, attention, tokens, seconds, seconds_per_token, peak_mb,
repeats, device. The workflow's `snakemake scaling` runs it (scripts/scaling.py) and draws
results/plots/scaling.png; from the shell, benchmarks/scaling.py, e.g.
    python benchmarks/scaling.py --lengths 1000 5000 20000 --out scaling.tsv
A fresh process measures one point as `python -m epiformer.model.scaling --point COMPONENT ATTENTION TOKENS`.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import pandas as pd
import torch

from epiformer.model.transformer import ATTENTION, EPITransformer, ModelConfig

BENCH_MODEL = dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, patch_size=1, kernel_size=1, dropout=0.0)


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so that it measures only what follows (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_pass(component: str, attention: str, tokens: int, device: torch.device):
    """A function running one forward + backward pass of the component at `tokens` tokens."""
    if component == "attention":
        heads, head_dim = BENCH_MODEL["n_heads"], BENCH_MODEL["d_model"] // BENCH_MODEL["n_heads"]
        q, k, v = (torch.randn(1, heads, tokens, head_dim, device=device, requires_grad=True) for _ in range(3))
        return lambda: ATTENTION[attention](q, k, v).sum().backward()
    model = EPITransformer(ModelConfig(attention=attention, **BENCH_MODEL)).to(device)
    if component == "projections":
        for block in model.blocks:
            block.attention.attend = lambda q, k, v, key_padding_mask=None: v
    generator = torch.Generator().manual_seed(0)
    enhancer, promoter = (
        torch.nn.functional.one_hot(torch.randint(0, 4, (1, n), generator=generator), 4).float().to(device)
        for n in (tokens // 2, tokens - tokens // 2)
    )
    return lambda: model(enhancer, promoter).sum().backward()


def measure_point(component: str, attention: str, tokens: int, repeats: int, device: torch.device) -> dict:
    """Time and peak memory of one point, measured in this process."""
    run = make_pass(component, attention, tokens, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device) / 2**20
    else:
        before = _status_mb("VmRSS")
        reset = _reset_peak_rss()
    started = time.perf_counter()
    run()  # the first pass measures memory and warms up; it is the timing too when repeats is 0
    _synchronize(device)
    first = time.perf_counter() - started
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:  # without a resettable mark, the process's lifetime peak (imports included) is an upper bound
        peak = _status_mb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times = []
    for _ in range(repeats):
        _synchronize(device)
        started = time.perf_counter()
        run()
        _synchronize(device)
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times) if times else first
    return {
        "component": component,
        "attention": attention,
        "tokens": tokens,
        "seconds": seconds,
        "seconds_per_token": seconds / tokens,
        "peak_mb": max(peak - before, 0.0),
        "repeats": repeats,
        "device": str(device),
    }


def measure_in_fresh_process(component: str, attention: str, tokens: int, repeats: int, device: str) -> dict:
    """measure_point in a new Python process, so the CPU peak-memory reading is its own."""
    command = [
        sys.executable,
        "-m",
        "epiformer.model.scaling",
        "--point",
        component,
        attention,
        str(tokens),
        "--repeats",
        str(repeats),
        "--device",
        device,
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def scaling_table(
    lengths: list[int], softmax_max_tokens: int, model_max_tokens: int, device: str = "cpu", threads: int = 1, log=print
) -> pd.DataFrame:
    """Every component at every length, linear and softmax side by side.

    Softmax stops at `softmax_max_tokens` (attention) and `model_max_tokens` (model): it is
    quadratic, and a single pass at 100k tokens already takes minutes on a CPU.
    """
    torch.set_num_threads(threads)
    plan = [
        ("attention", "linear"),
        ("attention", "softmax"),
        ("model", "linear"),
        ("model", "softmax"),
        ("projections", "linear"),
    ]
    rows = []
    for tokens in lengths:
        for component, attention in plan:
            # Softmax past 20k: one pass takes minutes, so the single measured pass is the timing.
            repeats = 0 if attention == "softmax" and tokens > 20_000 else 3
            limit = softmax_max_tokens if component == "attention" else model_max_tokens
            if attention == "softmax" and tokens > limit:
                continue
            point = (
                measure_in_fresh_process(component, attention, tokens, repeats, device)
                if device == "cpu"
                else measure_point(component, attention, tokens, repeats, torch.device(device))
            )
            log(
                f"{component:<12} {attention:<8} T={tokens:>7}: {point['seconds'] * 1e3:10.1f} ms, "
                f"peak {point['peak_mb']:8.1f} MB"
            )
            rows.append(point)
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame) -> list[str]:
    """The ratios that matter, in words: speed-up over softmax, linearity, attention overhead."""

    def value(component, attention, tokens, column="seconds"):
        hit = table[(table.component == component) & (table.attention == attention) & (table.tokens == tokens)]
        return float(hit[column].iloc[0]) if len(hit) else float("nan")

    lines = []
    for tokens in sorted(table.tokens.unique()):
        speedup = value("attention", "softmax", tokens) / value("attention", "linear", tokens)
        if speedup == speedup:
            lines.append(f"attention T={tokens}: softmax / linear time = {speedup:.1f}x")
    linear = table[(table.component == "attention") & (table.attention == "linear") & (table.tokens >= 5000)]
    if len(linear) > 1:
        per_token = linear.seconds_per_token
        lines.append(
            f"linear attention time per token, T={linear.tokens.min()}..{linear.tokens.max()}: "
            f"max/min = {per_token.max() / per_token.min():.2f}"
        )
    for tokens in sorted(table.tokens.unique()):
        overhead = value("model", "linear", tokens) / value("projections", "linear", tokens)
        if overhead == overhead:
            lines.append(f"whole linear model T={tokens}: {overhead:.2f}x the cost of its projections and feed-forward")
    return lines


def main(argv: list[str] | None = None) -> None:
    """The command line of benchmarks/scaling.py, and one `--point` in a fresh process."""
    parser = argparse.ArgumentParser(description="Linear vs softmax scaling (see the module docstring).")
    parser.add_argument("--point", nargs=3, metavar=("COMPONENT", "ATTENTION", "TOKENS"))
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000])
    parser.add_argument("--softmax-max-tokens", type=int, default=100_000)
    parser.add_argument("--model-max-tokens", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="write the table here (TSV)")
    args = parser.parse_args(argv)
    if args.point:
        torch.set_num_threads(args.threads)
        component, attention, tokens = args.point
        print(json.dumps(measure_point(component, attention, int(tokens), args.repeats, torch.device(args.device))))
        return
    table = scaling_table(args.lengths, args.softmax_max_tokens, args.model_max_tokens, args.device, args.threads)
    if args.out:
        table.to_csv(args.out, sep="\t", index=False)
    print("\n".join(summarise(table)))


if __name__ == "__main__":
    main()
