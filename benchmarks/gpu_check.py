"""The CUDA path in one short run, for a machine with a GPU (nothing here needs pyfaidx or Snakemake).

1. the attention tests on CUDA (float32 and bf16 against the naive references);
2. the scaling table on CUDA (time and peak memory, linear vs softmax);
3. training throughput of the default configuration (3 kb + 2 kb windows, ModelConfig
   defaults, batch 64) on CUDA under bf16 autocast, eager and compiled: tokens/s;
4. demo training on CUDA (bf16 autocast) from already-encoded shard folders, with test AUROC
   and tokens/s per model;
5. span training at 20k-100k tokens a sample (`--span-tokens`): optimiser steps of the long
   demo's span model (`models.linear_span` of config/demo_long.yaml, read from there: conv
   stem, max pooling, 4-bp patches, so 100k tokens are a 400 kb span) on one span a step,
   linear against softmax, bf16 autocast: tokens/s and peak GPU memory, or the error where
   softmax runs out of memory;
6. span mode at real scale (benchmarks/genome_scale_spans.py's step 4 on CUDA): one training step
   on one span of 200 kb, 1 Mb and 2 Mb at 4 bp a token (conv_exp) and 32 and 128 bp a token
   (conv_tower), bf16 autocast: seconds a step (median of 3, after a warm-up) and peak GPU memory;
7. the delta rules' chunked scan (issue 28) by PyTorch (`model.delta_rule`'s default) and by
   flash-linear-attention's Triton kernel where fla-core is installed, at 4k-64k tokens and head
   sizes 8 (the long demo's span model) and 16: forward + backward seconds (median of 3) and the
   largest difference between the two paths' outputs and gradients (or the error fla raised).
Usage (shards made here by `make demo`, copied beside the checkout):
    PYTHONPATH=src python3 benchmarks/gpu_check.py --shards results/demo_a/shards results/demo_b/shards --out OUT
Only the span measurement (also on the CPU, at small sizes, to check the code):
    PYTHONPATH=src python3 benchmarks/gpu_check.py --only-spans --span-tokens 20000 50000 100000
Only the real-scale span steps (on the CPU too, with --real-scale-lengths 20000 to check the code):
    PYTHONPATH=src python3 benchmarks/gpu_check.py --only-real-scale
Only the delta-rule kernels (on the CPU it times the PyTorch path alone):
    PYTHONPATH=src python3 benchmarks/gpu_check.py --only-delta-kernels
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from sklearn.metrics import roc_auc_score
from studies.long_demo_run import span_model_settings

from epiformer.data.shards import load_split
from epiformer.inference.trained_model import load_trained_model, predict_split
from epiformer.model.scaling import scaling_table, summarise
from epiformer.model.transformer import ModelConfig
from epiformer.training.train import TrainConfig, train_model

DEMO_MODEL = dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, patch_size=4, kernel_size=12, dropout=0.0)


def default_config_throughput(compiled: bool, steps: int = 20, device: str = "cuda") -> float:
    """Tokens/s of optimiser steps of the default model on 3 kb + 2 kb one-hot batches of 64, bf16 autocast."""
    from epiformer.inference.devices import mixed_precision
    from epiformer.model.transformer import EPITransformer

    device = torch.device(device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    config = ModelConfig(attention="linear", dropout=0.0)
    model = EPITransformer(config).to(device)
    step_model = torch.compile(model) if compiled else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs = [
        torch.nn.functional.one_hot(torch.randint(0, 4, (64, width), device=device), 4).float()
        for width in (3000, 2000)
    ]
    labels = (torch.rand(64, device=device) < 0.25).float()

    def step() -> None:
        with mixed_precision(device):
            logits = step_model(*inputs)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    tokens = 64 * sum(-(-width // config.patch_size) for width in (3000, 2000))
    return tokens * steps / (time.perf_counter() - started)


def span_training_throughput(attention: str, tokens: int, steps: int = 5, device: str = "cuda") -> dict:
    """Tokens/s and peak memory of optimiser steps on one span of `tokens` tokens, bf16 autocast on CUDA."""
    from epiformer.constants import SEGMENT_IDS
    from epiformer.inference.devices import mixed_precision
    from epiformer.model.transformer import EPITransformer

    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    config = ModelConfig(attention=attention, **span_model_settings())  # both attentions are measured
    model = EPITransformer(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    bases = tokens * config.patch_size
    span = torch.nn.functional.one_hot(torch.randint(0, 4, (1, bases), device=device), 4).float()
    segment = torch.full((1, bases), SEGMENT_IDS["between"], device=device)
    segment[:, :256], segment[:, -256:] = SEGMENT_IDS["enhancer"], SEGMENT_IDS["promoter"]
    valid = torch.ones(1, bases, dtype=torch.bool, device=device)

    def step() -> None:
        with mixed_precision(device):
            logit = model(span=span, segment=segment, span_valid=valid)
        loss = logit.float().square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    try:
        step()  # warm-up
        synchronize = torch.cuda.synchronize if cuda else lambda: None
        synchronize()
        started = time.perf_counter()
        for _ in range(steps):
            step()
        synchronize()
        seconds = time.perf_counter() - started
    except torch.OutOfMemoryError as error:
        return {"attention": attention, "tokens": tokens, "error": f"out of memory: {str(error)[:120]}"}
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    return {"attention": attention, "tokens": tokens, "tokens_per_s": tokens * steps / seconds, "peak_mb": peak}


def real_scale_steps(lengths, device: str, repeats: int = 3) -> list[dict]:
    """Seconds (median of `repeats`, after a warm-up) and peak memory of one training step on one span of each
    length at each of genome_scale_spans.py's resolutions, bf16 autocast on CUDA."""
    import statistics

    from genome_scale_spans import RESOLUTIONS

    from epiformer.inference.devices import mixed_precision
    from epiformer.model.transformer import EPITransformer

    device = torch.device(device)
    cuda = device.type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else lambda: None
    rows = []
    for patch, (stem, kernel) in RESOLUTIONS.items():
        for length in lengths:
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            torch.manual_seed(0)
            config = ModelConfig(
                attention="linear", input="span", d_model=32, n_layers=2, n_heads=4, d_ff=64, patch_size=patch,
                kernel_size=kernel, stem=stem, pool="max", element_pool=True, dropout=0.0,
            )  # fmt: skip
            model = EPITransformer(config).to(device)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            span = torch.nn.functional.one_hot(torch.randint(0, 4, (1, length), device=device), 4).float()
            segment = torch.full((1, length), 2, device=device)
            segment[:, :3000], segment[:, -2000:] = 0, 1
            valid = torch.ones(1, length, dtype=torch.bool, device=device)
            seconds = []
            for repeat in range(repeats + 1):
                synchronize()
                started = time.perf_counter()
                with mixed_precision(device):
                    logit = model(span=span, segment=segment, span_valid=valid)
                optimizer.zero_grad()
                logit.float().square().mean().backward()
                optimizer.step()
                synchronize()
                if repeat:  # the first is the warm-up
                    seconds.append(time.perf_counter() - started)
            peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
            median = statistics.median(seconds)
            rows.append({"patch": patch, "stem": stem, "span_bp": length, "seconds": median, "peak_mb": peak})
            print(rows[-1], flush=True)
    return rows


def delta_kernels(lengths, device: str, repeats: int = 3) -> list[dict]:
    """The gated delta rule both ways (what the model runs) by the PyTorch path and by fla's kernel."""
    import os
    import statistics

    from epiformer.model import delta_rule

    device = torch.device(device)
    synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    paths = ["torch"] + (["fla"] if device.type == "cuda" else [])
    rows = []
    for dim in (8, 16):
        for length in lengths:
            generator = torch.Generator(device=device).manual_seed(0)
            shape = (1, 4, length, dim)
            q, k, v = (torch.randn(shape, generator=generator, device=device).requires_grad_() for _ in range(3))
            beta = torch.rand(shape[:3], generator=generator, device=device).requires_grad_()
            decay = (torch.rand(shape[:3], generator=generator, device=device) * 0.1 + 0.9).requires_grad_()
            upstream = torch.randn(shape, generator=generator, device=device)
            results = {}
            for path in paths:
                os.environ[delta_rule.KERNEL_VARIABLE] = path
                try:
                    seconds = []
                    for repeat in range(repeats + 1):
                        synchronize()
                        started = time.perf_counter()
                        out = delta_rule.bidirectional_delta_rule(q, k, v, beta, decay)
                        grads = torch.autograd.grad(out, (q, k, v, beta, decay), upstream)
                        synchronize()
                        if repeat:  # the first is the warm-up (and Triton's compilation)
                            seconds.append(time.perf_counter() - started)
                    results[path] = (statistics.median(seconds), [out, *grads])
                except Exception as error:  # report fla's refusal (a head size, a dtype) and go on
                    results[path] = (f"{type(error).__name__}: {str(error)[:160]}", None)
            os.environ.pop(delta_rule.KERNEL_VARIABLE, None)
            row = {"head_size": dim, "tokens": length, **{f"{path}_s": result[0] for path, result in results.items()}}
            if results.get("fla", (0, None))[1] is not None:
                pairs = zip(results["torch"][1], results["fla"][1])
                row["max_difference"] = max((a - b).abs().max().item() for a, b in pairs)
            rows.append(row)
            print(row, flush=True)
    return rows


def span_table(lengths: list[int], device: str) -> list[dict]:
    rows = []
    for tokens in lengths:
        for attention in ("linear", "softmax"):
            rows.append(span_training_throughput(attention, tokens, device=device))
            print(rows[-1], flush=True)
        if all("tokens_per_s" in row for row in rows[-2:]):
            print(
                f"{tokens} tokens: linear / softmax tokens/s x{rows[-2]['tokens_per_s'] / rows[-1]['tokens_per_s']:.1f}"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", nargs="*", default=[])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", default="gpu_check")
    parser.add_argument("--span-tokens", type=int, nargs="+", default=[20_000, 50_000, 100_000])
    parser.add_argument("--only-spans", action="store_true", help="only the span measurement (step 5)")
    parser.add_argument("--real-scale-lengths", type=int, nargs="+", default=[200_000, 1_000_000, 2_000_000])
    parser.add_argument("--only-real-scale", action="store_true", help="only the real-scale span steps (step 6)")
    parser.add_argument("--delta-lengths", type=int, nargs="+", default=[4_000, 16_000, 64_000])
    parser.add_argument("--only-delta-kernels", action="store_true", help="only the delta-rule kernels (step 7)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only_real_scale:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        rows = real_scale_steps(args.real_scale_lengths, device)
        (out / "real_scale_steps.json").write_text(json.dumps(rows, indent=2))
        return
    if args.only_delta_kernels:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        (out / "delta_kernels.json").write_text(json.dumps(delta_kernels(args.delta_lengths, device), indent=2))
        return
    if args.only_spans:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        (out / "span_training.json").write_text(json.dumps(span_table(args.span_tokens, device), indent=2))
        return
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/model/test_ops.py",
            "tests/model/test_transformer.py",
        ],
        check=False,
    )
    table = scaling_table([1000, 5000, 20_000, 100_000], 100_000, 100_000, device="cuda")
    table.to_csv(out / "scaling_cuda.tsv", sep="\t", index=False)
    print("\n".join(summarise(table)), flush=True)
    results = {
        "default_config_tokens_per_s": {
            mode: default_config_throughput(mode == "compiled") for mode in ("eager", "compiled")
        }
    }
    print(results, flush=True)
    for shard_dir in args.shards:
        for attention in ("linear", "softmax"):
            started = time.time()
            target = out / Path(shard_dir).parent.name / attention
            description = train_model(
                shard_dir,
                ModelConfig(attention=attention, **DEMO_MODEL),
                TrainConfig(epochs=args.epochs, device="cuda", threads=4),
                target,
                out / "checkpoints" / target.parent.name / attention,
            )
            model, _ = load_trained_model(target, "cuda")
            scores, labels, _ = predict_split(model, load_split(shard_dir, "test"), 256, torch.device("cuda"))
            results[f"{target.parent.name}/{attention}"] = {
                "test_auroc": roc_auc_score(labels, scores),
                "wall_s": time.time() - started,
                "tokens_per_s": description["tokens_per_s"],
                "device": description["device"],
            }
            print(results, flush=True)
    results["span_training"] = span_table(args.span_tokens, "cuda")
    results["real_scale_steps"] = real_scale_steps(args.real_scale_lengths, "cuda")
    results["delta_kernels"] = delta_kernels(args.delta_lengths, "cuda")
    (out / "gpu_train.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
