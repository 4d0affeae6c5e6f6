"""Linear (M7) against softmax attention: forward + backward time as the sequence grows.

Prints, per sequence length T, the median time of each over several repeats measured side
by side in this run, and their ratio. Usage: python benchmarks/attention_scaling.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from epiformer.ops import linear_attention, softmax_attention


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(attention, q, k, v, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):  # the first call warms up and is discarded
        q_, k_, v_ = (t.detach().requires_grad_() for t in (q, k, v))
        synchronize(q.device)
        started = time.perf_counter()
        attention(q_, k_, v_).sum().backward()
        synchronize(q.device)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 8192])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    print(f"device {device}, dtype {dtype}, heads {args.heads}, head dim {args.head_dim}, forward + backward")
    print(f"{'T':>7} {'linear ms':>10} {'softmax ms':>11} {'softmax/linear':>15}")
    for length in args.lengths:
        q, k, v = (torch.randn(1, args.heads, length, args.head_dim, device=device, dtype=dtype) for _ in range(3))
        linear = median_seconds(linear_attention, q, k, v, args.repeats)
        softmax = median_seconds(softmax_attention, q, k, v, args.repeats)
        print(f"{length:>7} {linear * 1e3:>10.2f} {softmax * 1e3:>11.2f} {softmax / linear:>15.1f}")


if __name__ == "__main__":
    main()
