"""Peak memory and time of one training step on one long span, with and without recomputation.

For each span length (default 200 kb, 1 Mb and 2 Mb, real enhancer-promoter distances) one
training step (forward, backward, AdamW step) of config/demo_long.yaml's span model (conv_exp
stem, 4 bp a token, d_model 32, 2 layers) on one span, in a fresh process on one thread:
once as training runs it (`model.configs.RECOMPUTE_TOKENS`: batches over that many tokens
recompute each block and the conv stem chunk by chunk in the backward pass), once with
recomputation off. Printed side by side: the process's peak resident memory (ru_maxrss), the
step's seconds, and the ratios. Usage:
    python benchmarks/span_memory.py [--lengths 200000 1000000 2000000] [--patch 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

STEP = """
import json, resource, sys, time
import torch
import epiformer.model.transformer as transformer
from epiformer.model.configs import ModelConfig
length, patch, recompute = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "on"
if not recompute:
    transformer.RECOMPUTE_TOKENS = 10**12
torch.set_num_threads(1)
torch.manual_seed(0)
config = ModelConfig(attention="linear", input="span", d_model=32, n_layers=2, n_heads=4, d_ff=64,
                     patch_size=patch, kernel_size=max(19, patch), stem="conv_exp", pool="max",
                     element_pool=True, dropout=0.0)
model = transformer.EPITransformer(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
span = torch.nn.functional.one_hot(torch.randint(0, 4, (1, length)), 4).float()
segment = torch.full((1, length), 2)
segment[0, :3000], segment[0, -2000:] = 0, 1
valid = torch.ones(1, length, dtype=torch.bool)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
loss = torch.nn.functional.binary_cross_entropy_with_logits(
    model(span=span, segment=segment, span_valid=valid), torch.ones(1))
loss.backward()
optimizer.step()
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "before_mb": before}))
"""


def measure(length: int, patch: int, recompute: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", STEP, str(length), str(patch), recompute], capture_output=True, text=True
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", nargs="+", type=int, default=[200_000, 1_000_000, 2_000_000])
    parser.add_argument("--patch", type=int, default=4)
    args = parser.parse_args()
    print(f"One training step on one span, {args.patch} bp a token, one thread (peak: the process's ru_maxrss)")
    print(
        f"{'span':>10} {'tokens':>8}   {'off: peak MB':>12} {'s':>6}   {'on: peak MB':>11} {'s':>6}   "
        "memory on/off, time"
    )
    for length in args.lengths:
        off, on = measure(length, args.patch, "off"), measure(length, args.patch, "on")
        if "error" in off or "error" in on:
            print(f"{length:>10,} failed: off {off.get('error', 'ok')}; on {on.get('error', 'ok')}")
            continue
        print(
            f"{length:>10,} {length // args.patch:>8,}   {off['peak_mb']:>12,.0f} {off['seconds']:>6.1f}   "
            f"{on['peak_mb']:>11,.0f} {on['seconds']:>6.1f}   "
            f"{on['peak_mb'] / off['peak_mb']:>6.2f}x {on['seconds'] / off['seconds']:>5.2f}x"
        )
    print(
        f"(the process holds about {on.get('before_mb', 0):,.0f} MB before the step: PyTorch, the model and the input)"
    )


if __name__ == "__main__":
    main()
