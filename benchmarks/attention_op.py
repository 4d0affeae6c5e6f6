"""epiformer.model.ops.linear_attention against its peer and its FLOP limit: one thread, forward + backward.

Side by side in one run, for each head size and length (batch 1, 4 heads):
- ours: `linear_attention` on q, k, v laid out as the model passes them (views of one
  [B, T, 3, H, D] qkv projection), without a mask, with a mask that pads nothing, and with
  a mask that pads the last 10% of the keys;
- reference: the implementation before the hand-written backward (kept below, verbatim,
  as `reference_linear_attention`), on the same views;
- peer: pytorch-fast-transformers 0.4.0's `LinearAttention` on the same numbers, contiguous
  in its [N, L, H, E] layout, with full lengths and with the same 10% padded;
- the FLOP limit: 6 matrix products of 2 T D^2 per head (two forward, four backward) at the
  one-thread fp32 matmul rate measured in the same run (1024^3 products, before every shape);
- the six products alone, of the op's shapes on contiguous operands: the floor that these
  skinny [T, D] x [D, D] shapes allow before any elementwise work.
Each variant's time is the median of several repeats after a warm-up, the variants
interleaved so that a busy machine slows them alike; times are the CPU time of the one
thread (`time.thread_time`), which on a quiet machine is the wall time and on a shared one
leaves out the time other processes hold the core. Gradients are taken with
`torch.autograd.grad` against the op's own inputs for every variant, so no variant pays for
accumulating into a leaf. Usage:
    python benchmarks/attention_op.py [--lengths 1000 5000 20000 100000] [--dims 16 64] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from epiformer.model.ops import elu_feature_map, linear_attention

PEER_INSTALL = "pip install --no-build-isolation pytorch-fast-transformers==0.4.0"
HEADS = 4
PADDED_FRACTION = 0.1
MATMUL_SIZE = 1024


def reference_linear_attention(q, k, v, key_padding_mask=None, eps=1e-6):
    """epiformer.model.ops.linear_attention as it was before its hand-written backward (commit 6560b13).

    Autograd through the plain expression, with a column of ones appended to v for the normaliser.
    """
    dtype = q.dtype
    compute = torch.promote_types(dtype, torch.float32)
    with torch.autocast(device_type=q.device.type, enabled=False):
        phi_q, phi_k = elu_feature_map(q.to(compute)), elu_feature_map(k.to(compute))
        if key_padding_mask is not None:
            phi_k = phi_k.masked_fill(key_padding_mask[:, None, :, None], 0.0)
        v_ones = F.pad(v.to(compute), (0, 1), value=1.0)  # (B, H, T, D + 1)
        kv = phi_k.transpose(-1, -2) @ v_ones  # (B, H, D, D + 1)
        out = phi_q @ kv  # (B, H, T, D + 1)
        out = out[..., :-1] / (out[..., -1:] + eps)
    return out.to(dtype)


def load_peer():
    try:
        from fast_transformers.attention import LinearAttention
        from fast_transformers.masking import FullMask, LengthMask
    except ImportError:
        return None
    return LinearAttention, FullMask, LengthMask


def matmul_flops_per_second(repeats: int = 5) -> float:
    a, b = torch.randn(MATMUL_SIZE, MATMUL_SIZE), torch.randn(MATMUL_SIZE, MATMUL_SIZE)
    a @ b
    rates = []
    for _ in range(repeats):
        started = time.thread_time()
        a @ b
        rates.append(2 * MATMUL_SIZE**3 / (time.thread_time() - started))
    return statistics.median(rates)


def op_flops(length: int, dim: int, heads: int = HEADS) -> float:
    """Multiply-adds of the six [T, D] x [D, D]-sized products, forward + backward, batch 1."""
    return 6 * 2 * length * dim * dim * heads


def variants(length: int, dim: int, peer) -> dict:
    """name -> a function running forward + backward once, all on the same numbers."""
    generator = torch.Generator().manual_seed(0)
    qkv = torch.randn(1, length, 3, HEADS, dim, generator=generator)  # (B, T, 3, H, D): the model's projection
    q, k, v = (t.requires_grad_() for t in qkv.permute(2, 0, 3, 1, 4))  # each (B, H, T, D), strided views
    upstream = torch.randn(1, HEADS, length, dim, generator=generator)
    no_padding = torch.zeros(1, length, dtype=torch.bool)
    padded = no_padding.clone()
    padded[:, length - int(PADDED_FRACTION * length) :] = True

    def ours(function, mask):
        return lambda: torch.autograd.grad(function(q, k, v, key_padding_mask=mask), (q, k, v), upstream)

    first, second = torch.randn(2, HEADS, length, dim, generator=generator)  # contiguous (H, T, D)

    def six_products():
        """The op's matrix products alone, on contiguous operands: what the layout and shapes allow."""
        summary = torch.bmm(first.transpose(1, 2), second)  # (H, D, D), as phi_k^T v and r^T g
        torch.bmm(first, summary), torch.bmm(second, summary.transpose(1, 2))  # as r kv and g kv^T
        summary = torch.bmm(first.transpose(1, 2), second)
        torch.bmm(second, summary.transpose(1, 2)), torch.bmm(first, summary)  # as v dkv^T and phi_k dkv

    runs = {
        "six products alone": six_products,
        "ours": ours(linear_attention, None),
        "ours, mask without padding": ours(linear_attention, no_padding),
        "ours, mask with 10% padding": ours(linear_attention, padded),
        "reference": ours(reference_linear_attention, None),
    }
    if peer is not None:
        LinearAttention, FullMask, LengthMask = peer
        attention = LinearAttention(dim)
        pq, pk, pv = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))  # (N, L, H, E)
        peer_upstream = upstream.transpose(1, 2).contiguous()
        # LinearAttention reads only `all_ones` of attn_mask; FullMask(T) would be a T x T bool
        # tensor (10 GB at 100k tokens), so a 1 x 1 one stands in for it.
        full, all_lengths = FullMask(1, 1), LengthMask(torch.tensor([length]), max_len=length)

        def theirs(key_lengths):
            out = attention(pq, pk, pv, full, all_lengths, key_lengths)
            return [out, *torch.autograd.grad(out, (pq, pk, pv), peer_upstream)]

        runs["peer"] = lambda: theirs(all_lengths)
        runs["peer, 10% padding"] = lambda: theirs(LengthMask((~padded).sum(dim=1), max_len=length))
        out = linear_attention(q, k, v)
        ours_results = [out, *torch.autograd.grad(out, (q, k, v), upstream)]
        largest = max((a - b.transpose(1, 2)).abs().max().item() for a, b in zip(ours_results, theirs(all_lengths)))
        print(f"  D {dim}, T {length}: largest |ours - peer| in output, dq, dk, dv: {largest:.1e}")
    return runs


def median_times(runs: dict, repeats: int) -> dict:
    """name -> median ms of one thread's CPU time over `repeats`, after a warm-up, the runs interleaved."""
    for run in runs.values():
        run()  # warm-up
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.thread_time()
            run()
            times[name].append(time.thread_time() - started)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def time_shape(length: int, dim: int, peer, repeats: int) -> dict:
    return median_times(variants(length, dim, peer), repeats)


def repeats_for(length: int, quick: bool) -> int:
    repeats = 5 if length >= 50_000 else 7 if length >= 10_000 else 11
    return max(3, repeats // 2) if quick else repeats


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 5000, 20_000, 100_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64], help="head sizes (4 heads each)")
    parser.add_argument("--quick", action="store_true", help="1k and 5k tokens only, fewer repeats")
    args = parser.parse_args(argv)
    lengths = ([n for n in args.lengths if n <= 5000] or args.lengths[:1]) if args.quick else args.lengths
    torch.set_num_threads(1)
    peer = load_peer()
    if peer is None:
        print(
            "pytorch-fast-transformers is not installed; the peer is left out. Install it (for this benchmark only;"
            f" it builds C++ for the CPU in about 6 minutes) with:\n  {PEER_INSTALL}\n"
            "If the build asks for CUDA_HOME, an nvcc without CUDA is on PATH: install with a PATH that leaves it out."
        )
    rows = []
    for dim in args.dims:
        for length in lengths:
            rate = matmul_flops_per_second()
            times = time_shape(length, dim, peer, repeats_for(length, args.quick))
            rows.append((dim, length, rate, op_flops(length, dim) / rate * 1e3, times))
    print_table(rows, peer is not None)


def print_table(rows, with_peer: bool) -> None:
    names = list(rows[0][4])
    print(f"\nforward + backward, 1 thread, batch 1, {HEADS} heads; ms, median of repeats")
    table = [["D", "T", "GFLOP/s", "FLOP limit", *names]]
    table += [
        [dim, length, f"{rate / 1e9:.0f}", f"{limit:.2f}", *(f"{t[n]:.2f}" for n in names)]
        for dim, length, rate, limit, t in rows
    ]
    print_aligned(table)
    print("\nratios: peer / ours > 1 where ours is faster; ours / FLOP limit = 1 at the limit")
    header = ["D", "T", "reference / ours", "ours / FLOP limit", "six products / FLOP limit", "ours / six products"]
    if with_peer:
        header += ["peer / ours", "peer / ours with a mask, no padding", "peer / ours, 10% padding"]
    table = [header]
    for dim, length, _, limit, t in rows:
        products = t["six products alone"]
        cells = [dim, length, t["reference"] / t["ours"], t["ours"] / limit, products / limit, t["ours"] / products]
        if with_peer:
            cells += [
                t["peer"] / t["ours"],
                t["peer"] / t["ours, mask without padding"],
                t["peer, 10% padding"] / t["ours, mask with 10% padding"],
            ]
        table.append([f"{c:.2f}" if isinstance(c, float) else c for c in cells])
    print_aligned(table)


def print_aligned(table) -> None:
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))


if __name__ == "__main__":
    main()
