"""The conv stem against the layers it replaces: Conv1d, the activation and MaxPool1d, side by side.

`stem: conv` computes each filter at every base and keeps each channel's largest ReLU
response within a patch (`conv_exp`: exp in place of ReLU). The model does it as one matrix
product over each token's bases and a fused patch maximum and activation
(`Tokenizer.patch_tokens`, `patch_max`); the reference here is the same stem written
with PyTorch's layers (the model's code before), with the same weights, for the stem of
config/demo_long.yaml's span models. Both are timed forward + backward on the span model of
config/demo_long.yaml (a batch of spans of `--tokens` tokens in all), the stem alone and a
whole training step (AdamW included), alternating in rounds so that a busy machine slows
both alike. Printed: median ms, and reference / model (> 1 where the model is faster).
Usage:
    python benchmarks/conv_stem.py [--spans 4] [--tokens 16384] [--rounds 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from studies.long_demo_run import span_model_settings

from epiformer.constants import SEGMENT_IDS
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer, Tokenizer


class LayersTokenizer(Tokenizer):
    """The conv stem as Conv1d, its activation (ReLU, or exp for conv_exp) and MaxPool1d, on the same weights."""

    def forward(self, onehot, valid):
        batch, length, _ = onehot.shape
        tail = -length % self.patch
        onehot = F.pad(onehot * valid[..., None], (0, 0, 0, tail))
        valid = F.pad(valid, (0, tail))
        token_valid = valid.view(batch, -1, self.patch).any(dim=-1)
        left = (self.kernel - 1) // 2
        x = F.pad(onehot.transpose(1, 2), (left, self.kernel - 1 - left))  # (B, 4, L + tail + k - 1)
        activation = torch.exp if self.stem == "conv_exp" else torch.relu
        per_base = activation(self.project(x))  # (B, D, L + tail)
        return F.max_pool1d(per_base, self.patch).transpose(1, 2), token_valid  # (B, T, D), a transposed view


def span_batch(spans: int, tokens: int, patch: int) -> dict[str, torch.Tensor]:
    """`spans` random spans of tokens / spans tokens each, the first and last 300 bases the elements."""
    generator = torch.Generator().manual_seed(0)
    length = tokens // spans * patch
    bases = torch.randint(0, 4, (spans, length), generator=generator)
    segment = torch.full((spans, length), SEGMENT_IDS["between"])
    segment[:, :300], segment[:, -300:] = SEGMENT_IDS["enhancer"], SEGMENT_IDS["promoter"]
    return {
        "span": F.one_hot(bases, 4).float(),
        "segment": segment,
        "span_valid": torch.ones(spans, length, dtype=torch.bool),
    }


def models(settings: dict) -> dict[str, EPITransformer]:
    model = EPITransformer(ModelConfig(attention="linear", **settings))
    reference = EPITransformer(ModelConfig(attention="linear", **settings))
    reference.tokenizer = LayersTokenizer(reference.config)
    reference.load_state_dict(model.state_dict())
    return {"model": model, "layers": reference}


def stem_pass(model: EPITransformer, batch: dict) -> None:
    tokens, _ = model.tokenizer(batch["span"], batch["span_valid"])
    tokens.sum().backward()


def training_step(model: EPITransformer, optimizer: torch.optim.Optimizer, batch: dict) -> None:
    model(**batch).sum().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def milliseconds(work, *args) -> float:
    start = time.perf_counter()
    work(*args)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16384, help="model tokens in the batch, all spans together")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = span_model_settings()
    batch = span_batch(args.spans, args.tokens, settings["patch_size"])
    built = models(settings)
    optimizers = {name: torch.optim.AdamW(model.parameters()) for name, model in built.items()}
    with torch.no_grad():
        difference = (built["model"](**batch) - built["layers"](**batch)).abs().max().item()
    shape = f"{args.spans} spans of {args.tokens // args.spans} tokens"
    print(f"{shape}; largest |model - layers| in the logits: {difference:.1e}")
    times = {(part, name): [] for part in ("stem", "step") for name in built}
    for round_ in range(args.rounds + 1):  # the first round warms up and is not counted
        for name, model in built.items():
            stem = milliseconds(stem_pass, model, batch)
            model.zero_grad(set_to_none=True)
            step = milliseconds(training_step, model, optimizers[name], batch)
            if round_:
                times["stem", name].append(stem)
                times["step", name].append(step)
    print(f"median ms of {args.rounds} rounds, forward + backward, {args.threads} thread(s)")
    print(f"{'':<28}{'model':>10}{'layers':>10}{'layers / model':>16}")
    for part, label in (("stem", "the stem alone"), ("step", "a training step")):
        ours, layers = (statistics.median(times[part, name]) for name in ("model", "layers"))
        print(f"{label:<28}{ours:>10.1f}{layers:>10.1f}{layers / ours:>16.2f}")


if __name__ == "__main__":
    main()
