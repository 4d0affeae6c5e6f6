"""The gated delta rule token by token in C++ on the CPU, with its hand-written backward pass.

`delta_rule._chunked` gathers each chunk's updates into small matrix products (Yang et al.
2024): on a GPU that is the fast form, but on a CPU core its many [C, C] and [D, D] products
and their autograd graph cost 14-28x ELU+1 linear attention at heads of 16 (one thread). The recurrence
itself (delta_rule's module docstring) reads and writes a [D, D] state a few times a token,
all of it in cache: `delta_rule_kernel.cpp` runs it as plain loops, keeps the state every
CHECKPOINT_TOKENS tokens and, backward, recomputes each stretch from there and walks it in
reverse (memory: T / CHECKPOINT_TOKENS states, not T). Sequences (batch rows x heads) run in
parallel on PyTorch's threads.

The extension is compiled on first use (`torch.utils.cpp_extension`, a C++ compiler and ninja
needed; cached under `$TORCH_EXTENSIONS_DIR`, by default ~/.cache/torch_extensions; one process builds
while the others wait, BUILD_GUARD), for the
instruction set PyTorch's own kernels use here (`torch.backends.cpu.get_cpu_capability()`), its
name carrying it, so that machines of another instruction set sharing a home folder never load
each other's build. `load()` returns None, saying why once, where it cannot be built.
Same recurrence, same numbers as `delta_rule.naive_gated_delta_rule` to float rounding (tested,
gradients too); sums in another order than the chunked form.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
from pathlib import Path

import torch

CHECKPOINT_TOKENS = 64  # tokens between the states the forward pass keeps for the backward pass
SOURCE = Path(__file__).with_name("delta_rule_kernel.cpp")
# The instruction set of PyTorch's own CPU kernels here -> the compiler's flags for it. FMA contracts a
# multiply and an add into one rounding, as oneDNN's kernels do on these machines.
ARCHITECTURE_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mprefer-vector-width=512"],
    "AVX2": ["-mavx2", "-mfma"],
}

log = logging.getLogger(__name__)


# Held (flock) by each process of this package while it builds or loads the extension: the system releases it
# when its holder dies, however it dies, where torch's own build lock (a file it waits on, without a timeout)
# stays behind a killed build and blocks every later one.
BUILD_GUARD = "epiformer.flock"


@functools.cache
def load():
    """The compiled extension, or None (logged once, with the reason) where it cannot be built here."""
    capability = torch.backends.cpu.get_cpu_capability()
    name = f"epiformer_delta_rule_{capability.lower()}"
    flags = ["-O3", "-fopenmp-simd", *ARCHITECTURE_FLAGS.get(capability, [])]
    try:
        from torch.utils import cpp_extension

        folder = Path(cpp_extension._get_build_directory(name, verbose=False))
        with exclusive(folder / BUILD_GUARD):
            remove_left_lock(folder / "lock")
            return cpp_extension.load(name=name, sources=[str(SOURCE)], extra_cflags=flags)
    except (OSError, RuntimeError, ImportError, SystemExit) as error:  # no compiler, no ninja, a failed build
        log.warning("the C++ delta rule could not be built here (%s); the PyTorch path runs instead", error)
        return None


@contextlib.contextmanager
def exclusive(path: Path):
    """Hold an exclusive flock on `path` (created if need be) for the block: one process at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_left_lock(lock: Path) -> None:
    """Remove torch's build lock, if any, while holding BUILD_GUARD: no live build of ours holds it then, so a
    build that was killed left it."""
    if lock.exists():
        lock.unlink(missing_ok=True)
        log.warning("removed %s, left by a build that did not finish", lock)


def available() -> bool:
    """Whether the C++ kernel builds (and loads) on this machine."""
    return load() is not None


def recurrent_gated_delta_rule(q, k, v, beta, log_decay, both_ways: bool = False) -> torch.Tensor:
    """The gated delta rule on `delta_rule._prepared` inputs (q, k, v [B, H, T, D], beta and log decay
    [B, H, T]), token by token in C++: [B, H, T, Dv]. With `both_ways`, the mean of the scan from the first
    token and the scan from the last (`delta_rule.bidirectional_delta_rule`), with no flipped copies.
    Differentiable in all five inputs."""
    inputs = (q, k, v, beta, log_decay)
    # Kept states serve a backward pass only: none under no_grad, nor when no input needs a gradient.
    keep = torch.is_grad_enabled() and any(x.requires_grad for x in inputs)
    return _RecurrentDeltaRule.apply(*inputs, (False, True) if both_ways else (False,), keep)


class _RecurrentDeltaRule(torch.autograd.Function):
    """Once differentiable: its backward pass is the C++ one, not a graph (a gradient of the gradient is not kept)."""

    @staticmethod
    def forward(ctx, q, k, v, beta, log_decay, directions, keep):
        extension = load()
        if extension is None:
            raise RuntimeError("the C++ delta rule is not built here (see the warning above)")
        batch, heads, length, _ = q.shape
        flat = [x.reshape(batch * heads, length, -1).contiguous() for x in (q, k, v)]
        flat += [x.reshape(batch * heads, length).contiguous() for x in (beta, log_decay)]
        out = v.new_zeros(batch, heads, length, v.shape[-1])  # returned whole, not as a view of another shape
        states = [
            extension.forward(*flat, out.view(flat[2].shape), CHECKPOINT_TOKENS, keep, reverse)
            for reverse in directions
        ]
        if keep:
            ctx.save_for_backward(*flat, *states)
            ctx.shapes, ctx.directions = [x.shape for x in (q, k, v, beta, log_decay)], directions
        return out.div_(len(directions))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        flat, states = ctx.saved_tensors[:5], ctx.saved_tensors[5:]
        grad = (grad / len(ctx.directions)).reshape(flat[2].shape)
        grads = [torch.zeros_like(x) for x in flat]
        for reverse, kept in zip(ctx.directions, states):
            load().backward(*flat, kept, grad, *grads, CHECKPOINT_TOKENS, reverse)
        return (*(g.view(shape) for g, shape in zip(grads, ctx.shapes)), None, None)
