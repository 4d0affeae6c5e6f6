"""The delta rule and the gated delta rule (DeltaNet, Gated DeltaNet) as pure functions: causal scans.

Shapes as in `epiformer.model.ops`: q, k, v are [B, H, T, D]; `key_padding_mask` is bool
[B, T], True at padding. `beta` [B, H, T] is each token's writing strength in (0, 1) and, for
the gated rule, `decay` [B, H, T] how much of the state each token keeps, in (0, 1].
q and k are L2-normalised per head here (Yang et al. 2024: with them the state stays bounded,
and in Gated DeltaNet's ablation the normalisation mattered more than the feature map); q is
then scaled by D^-1/2, as flash-linear-attention's kernels do by default.

The recurrence, with state S [D, D] (keys by values), per token t:

    S <- decay_t S                                   (gated rule only)
    S <- S + beta_t k_t (v_t - S^T k_t)^T            (the delta rule: correct S toward v_t)
    o_t = S^T q_t

A padded token neither writes nor is read: its beta is 0 and its decay 1, so it leaves the
state as it was; its own output is defined but meaningless (the model pools valid tokens only).

`delta_rule` and `gated_delta_rule` compute this chunk by chunk (Yang et al. 2024, "Parallelizing
linear transformers with the delta rule over sequence length"): within a chunk of C tokens the
updates are gathered in the WY / UT form, one triangular solve of [C, C] and matrix products,
for every chunk at once. The state is carried across the T / C chunks by a parallel prefix scan
of their affine maps at small heads (no Python loop over chunks; a few D x D products more),
else by a loop over the chunks (`scans_across_chunks`). Linear in T, and
no T x T tensor. Gradients come from autograd through these products. The bidirectional rule
runs both directions as one batch. The `naive_*` functions run the recurrence token by token:
references for tests, never for the model.

Two other scans take the same prepared inputs. On the CPU, `delta_rule_kernel` runs the
recurrence token by token in C++ with a hand-written backward pass (4.7-6.0x ELU+1 where this chunked
form costs 14-28x on one core): `EPIFORMER_DELTA_KERNEL=cpp`. On a CUDA device with
flash-linear-attention installed (`pip install fla-core`), its Triton kernel
(`chunk_gated_delta_rule`): `EPIFORMER_DELTA_KERNEL=fla`. `auto` takes each where it can run;
`scan_kernel` decides. This PyTorch path stays the default everywhere; fla's kernel has not yet
run on this project's machines (benchmarks/gpu_check.py compares the two).
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F

from epiformer.model import delta_rule_kernel

# Tokens per chunk. fla's GPU kernels take 64; on one CPU thread 32 was fastest for heads of 8 to 32
# (forward + backward at 16k tokens: 283 ms against 388 at 64 and 362 at 16, heads of 8), 64 for heads of 64.
CHUNK = 32
# Within a chunk, decays are factored as exp(gamma_i) exp(-gamma_j) while the chunk's cumulative log decay
# stays above minus this (exp(80) = 5.5e34 is far from float32's 3.4e38); stronger decays take the exact path.
FACTORED_LOG_DECAY = 80.0
SCAN_MAX_HEAD = 16  # heads up to this size carry the state across chunks by a scan, larger by a loop
NORM_EPS = 1e-6  # of the L2 normalisation (a zero vector, e.g. a padded key, stays zero)
# Which scan runs: "torch" (the default: the chunked PyTorch form everywhere), "cpp" (the recurrence token by
# token in C++ on the CPU, `delta_rule_kernel`), "fla" (fla's Triton kernel on CUDA) or "auto" (fla's kernel on
# CUDA when fla imports, the C++ one on the CPU where it builds, else PyTorch); "cpp" and "fla" are an error
# where they cannot run.
KERNEL_VARIABLE = "EPIFORMER_DELTA_KERNEL"
KERNEL_CHOICES = ("torch", "cpp", "fla", "auto")
CPP_KERNEL = "cpp"  # scan_kernel's answer for the C++ recurrence


def delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
    chunk_size: int = CHUNK,
) -> torch.Tensor:
    """The causal delta rule (module docstring), chunked: [B, H, T, D] in q's dtype."""
    return gated_delta_rule(q, k, v, beta, None, key_padding_mask, chunk_size)


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    decay: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None = None,
    chunk_size: int = CHUNK,
) -> torch.Tensor:
    """The causal gated delta rule (module docstring), chunked (`chunk_size` tokens; the C++ and fla scans take
    their own); `decay` None is the plain delta rule.

    Computed in (at least) float32 even under autocast, as linear attention is: the state is
    a running sum over every token. Returns [B, H, T, D] in q's dtype.
    """
    kernel = scan_kernel(q.device)
    if kernel is None:
        scan = functools.partial(_chunked, chunk_size=chunk_size)
    elif kernel == CPP_KERNEL:
        scan = delta_rule_kernel.recurrent_gated_delta_rule
    else:
        scan = functools.partial(through_fla, kernel)
    return _in_compute_dtype(scan, q, k, v, beta, decay, key_padding_mask)


def _in_compute_dtype(scan, q, k, v, beta, decay, key_padding_mask) -> torch.Tensor:
    """scan(q, k, v, beta, log_decay) of the `_prepared` inputs, in (at least) float32 even under autocast,
    returned in q's dtype."""
    dtype = q.dtype
    compute = torch.promote_types(dtype, torch.float32)
    with torch.autocast(device_type=q.device.type, enabled=False):
        out = scan(*_prepared(q, k, v, beta, decay, key_padding_mask, compute))
    return out.to(dtype)


def scan_kernel(device: torch.device):
    """The scan `EPIFORMER_DELTA_KERNEL` asks for on this device (module docstring): fla's chunked gated delta rule,
    CPP_KERNEL for the C++ recurrence, or None: the PyTorch path."""
    choice = os.environ.get(KERNEL_VARIABLE, "torch")
    if choice not in KERNEL_CHOICES:
        raise ValueError(f"{KERNEL_VARIABLE}={choice!r}: expected one of {', '.join(KERNEL_CHOICES)}")
    if choice == "torch":
        return None
    if device.type == "cpu" and choice in ("cpp", "auto"):
        return _cpp_kernel(required=choice == "cpp")
    if choice == "cpp":
        raise RuntimeError(
            f"{KERNEL_VARIABLE}=cpp runs on the CPU; here the device is {device.type}. "
            f"Unset {KERNEL_VARIABLE} (or set it to auto) on a GPU."
        )
    if choice == "auto" and device.type != "cuda":
        return None
    kernel = _fla_kernel()
    if choice == "fla" and (kernel is None or device.type != "cuda"):
        raise RuntimeError(
            f"{KERNEL_VARIABLE}=fla needs a CUDA device and flash-linear-attention (pip install fla-core); "
            f"here: device {device.type}, fla {'importable' if kernel else 'not importable'}. "
            f"Unset {KERNEL_VARIABLE} to use the PyTorch path."
        )
    return kernel


def scan_kernel_name(device: torch.device) -> str:
    """Which scan the delta rules run on `device` now: "torch", "cpp" or "fla" (model.json records it: the kernels
    sum in different orders, so the same config trains weights that differ in their last bits)."""
    kernel = scan_kernel(device)
    return "torch" if kernel is None else CPP_KERNEL if kernel == CPP_KERNEL else "fla"


def _cpp_kernel(required: bool):
    """CPP_KERNEL where the C++ recurrence builds here; else an error if `required`, None if not."""
    if delta_rule_kernel.available():
        return CPP_KERNEL
    if required:
        raise RuntimeError(
            f"{KERNEL_VARIABLE}=cpp needs the C++ delta rule, which could not be built here (the warning above says "
            f"why: a C++ compiler and ninja are needed, e.g. apt-get install g++ ninja-build). "
            f"Unset {KERNEL_VARIABLE} to use the PyTorch path."
        )
    return None


@functools.cache
def _fla_kernel():
    """fla's `chunk_gated_delta_rule`, or None where fla (or the Triton it needs) does not import."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except (ImportError, RuntimeError):  # not installed, or Triton failing to find a GPU driver at import
        return None
    return chunk_gated_delta_rule


def through_fla(kernel, q, k, v, beta, log_decay) -> torch.Tensor:
    """The gated delta rule by fla's kernel (or one of its references, with fla's arguments) on `_prepared` inputs.

    fla's layout is [B, T, H, D] and its decay is given in log space (`g`); q is already
    normalised and scaled here, so the kernel's scale is 1. Returns [B, H, T, D].
    """
    to_fla = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    out, _ = kernel(q=to_fla(q), k=to_fla(k), v=to_fla(v), g=to_fla(log_decay), beta=to_fla(beta), scale=1.0)
    return out.transpose(1, 2)


def _prepared(q, k, v, beta, decay, key_padding_mask, compute):
    """q, k normalised (q scaled), and beta 0 and log decay 0 at padding: a padded token leaves the state alone."""
    q = F.normalize(q.to(compute), dim=-1, eps=NORM_EPS) * q.shape[-1] ** -0.5
    k = F.normalize(k.to(compute), dim=-1, eps=NORM_EPS)
    v, beta = v.to(compute), beta.to(compute)
    # A decay that underflowed to 0 (exp(-softplus(z)) for z > ~100 in float32) keeps the smallest
    # normal number instead: log 0 would turn the whole scan into NaN.
    tiny = torch.finfo(compute).tiny
    log_decay = torch.zeros_like(beta) if decay is None else torch.log(decay.to(compute).clamp_min(tiny))
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, :]  # (B, 1, T)
        k = k.masked_fill(padding[..., None], 0.0)
        beta = beta.masked_fill(padding, 0.0)
        log_decay = log_decay.masked_fill(padding, 0.0)
    return q, k, v, beta, log_decay


def _chunked(q, k, v, beta, log_decay, chunk_size: int) -> torch.Tensor:
    """The gated delta rule over chunks of `chunk_size` tokens (the sequence padded with tokens that do nothing)."""
    batch, heads, length, dim = q.shape
    tail = -length % chunk_size
    if tail:  # beta 0 and log decay 0: the padding tokens neither write nor decay
        q, k, v = (F.pad(x, (0, 0, 0, tail)) for x in (q, k, v))
        beta, log_decay = F.pad(beta, (0, tail)), F.pad(log_decay, (0, tail))
    chunks = q.shape[2] // chunk_size
    q, k, v = (x.view(batch, heads, chunks, chunk_size, dim) for x in (q, k, v))
    beta, log_decay = (x.view(batch, heads, chunks, chunk_size) for x in (beta, log_decay))

    gamma = log_decay.cumsum(-1)  # (B, H, N, C): log of the decay from the chunk's start to each token
    k_beta = k * beta[..., None]
    q_decayed, k_beta_decayed = q * gamma.exp()[..., None], k_beta * gamma.exp()[..., None]
    if gamma.min() > -FACTORED_LOG_DECAY:
        # decay_between[i, j] = exp(gamma_i - gamma_j) = exp(gamma_i) exp(-gamma_j): the decays ride on the
        # rows and columns of the products, and no C x C tensor is exponentiated, masked or multiplied.
        k_undecayed = k * torch.exp(-gamma)[..., None]
        interactions = k_beta_decayed @ k_undecayed.transpose(-1, -2)
        scores = (q_decayed @ k_undecayed.transpose(-1, -2)).tril()  # causal within the chunk (diagonal kept)
    else:  # decays so strong that exp(-gamma) would overflow: each pair's decay computed on its own
        lower = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
        decay_between = torch.exp((gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, -torch.inf))
        interactions = k_beta @ k.transpose(-1, -2) * decay_between
        scores = q @ k.transpose(-1, -2) * decay_between
    # The UT transform, T = (I + strictly_lower(diag(beta) K K^T * decay))^-1, applied by one triangular
    # solve of both right-hand sides (fewer multiply-adds than forming T: C^2 D against C^3 / 3 + 2 C^2 D).
    # The solve reads the strictly lower triangle only, its diagonal taken as ones: `interactions` needs no tril.
    rows = torch.cat([v * beta[..., None], k_beta_decayed], dim=-1)
    solved = torch.linalg.solve_triangular(interactions, rows, upper=False, unitriangular=True)
    u, w = solved.split([v.shape[-1], dim], dim=-1)  # what each token writes; how its write reads the initial state
    k_to_end = k * torch.exp(gamma[..., -1:] - gamma)[..., None]  # each key's write, decayed to the chunk's end

    if scans_across_chunks(dim):
        states = _states_by_scan(gamma, k_to_end, u, w)
        written = u - w @ states  # (B, H, N, C, Dv): what each token writes, given the state before its chunk
        out = q_decayed @ states + scores @ written
    else:
        out = _outputs_by_loop(gamma, k_to_end, u, w, q_decayed, scores)
    return out.reshape(batch, heads, chunks * chunk_size, -1)[:, :, :length]


def scans_across_chunks(dim: int) -> bool:
    """Whether the state is carried across chunks by a prefix scan (`chunk_states`) or a loop over the chunks.

    The scan runs no Python loop over the T / C chunks but multiplies D x D matrices, about
    2.5 D^3 / C multiply-adds a token more than the loop's 3 D^2: it wins at small heads, whatever
    the chunk size. Measured
    (one thread, forward + backward, both ways, 16k tokens; ratio to ELU+1, scan against loop):
    heads of 16: 20 / 31x at chunks of 16, 19 / 23x at 32, 21 / 24x at 64; heads of 32: 25 / 23x,
    20 / 18x, 19 / 18x; heads of 64: 40 / 16x, 25 / 13x, 18 / 13x.
    """
    return dim <= SCAN_MAX_HEAD


def _states_by_scan(gamma, k_to_end, u, w) -> torch.Tensor:
    """The state before each chunk, (B, H, N, D, Dv), by `chunk_states`.

    Across chunks the state follows an affine recurrence, S_{n+1} = A_n S_n + B_n with
    A_n = decay_n I - K_n^T W_n and B_n = K_n^T U_n (K the keys decayed to the chunk's end).
    """
    eye = torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)
    transition = gamma[..., -1].exp()[..., None, None] * eye - k_to_end.transpose(-1, -2) @ w  # (B, H, N, D, D)
    return chunk_states(transition, k_to_end.transpose(-1, -2) @ u)


def _outputs_by_loop(gamma, k_to_end, u, w, q_decayed, scores) -> torch.Tensor:
    """Each chunk's outputs, (B, H, N, C, Dv), carrying the state from chunk to chunk in a loop."""
    batch, heads, _, _, dim = w.shape
    chunk_decay = gamma[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1): the state decayed across each chunk
    # unbind, not indexing in the loop: the backward of each index would write a whole-sequence gradient
    # (quadratic in T over the loop), where unbind's gathers them once.
    per_chunk = zip(*(x.unbind(2) for x in (u, w, q_decayed, scores, k_to_end, chunk_decay)))
    state = w.new_zeros(batch, heads, dim, u.shape[-1])
    outputs = []
    for u_c, w_c, q_c, scores_c, k_c, decay_c in per_chunk:
        written = u_c - w_c @ state  # (B, H, C, D)
        outputs.append(q_c @ state + scores_c @ written)
        state = state * decay_c + k_c.transpose(-1, -2) @ written
    return torch.stack(outputs, dim=2)


def chunk_states(transition: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    """S_n for every n of S_0 = 0, S_{n+1} = A_n S_n + B_n (`transition` A [..., N, D, D], `written` B
    [..., N, D, E]): the state before each chunk, [..., N, D, E].

    An exclusive prefix scan of the affine maps (A, B), composed (A2, B2) o (A1, B1) = (A2 A1,
    A2 B1 + B2): neighbours are paired, the half-length sequence scanned the same way, and the
    states between filled in (Blelloch's work-efficient scan), so O(log N) batched products do
    what a loop over N chunks did, in about twice its multiply-adds.
    """
    return _one_chunk_later(_inclusive_affine_scan(transition, written))  # S_{n+1} moved to n+1


def _one_chunk_later(states: torch.Tensor) -> torch.Tensor:
    """[..., N, D, E] states after each chunk as the states before each: a zero state first, the last dropped."""
    return torch.cat([torch.zeros_like(states[..., :1, :, :]), states[..., :-1, :, :]], dim=-3)


def _inclusive_affine_scan(transition: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    """S_{n+1} for every n (`chunk_states`' recurrence): the B of the maps composed from chunk 0 to n."""
    count = transition.shape[-3]
    if count == 1:
        return written
    odd = count % 2
    if odd:  # an identity map at the end pairs the last chunk; its result is dropped
        eye = torch.eye(transition.shape[-1], dtype=transition.dtype, device=transition.device)
        transition = torch.cat([transition, eye.expand_as(transition[..., :1, :, :])], dim=-3)
        written = torch.cat([written, torch.zeros_like(written[..., :1, :, :])], dim=-3)
    first_a, second_a = transition[..., 0::2, :, :], transition[..., 1::2, :, :]
    first_b, second_b = written[..., 0::2, :, :], written[..., 1::2, :, :]
    # Each pair's map, then the scan of the pairs: the state after every second chunk.
    after_pairs = _inclusive_affine_scan(second_a @ first_a, second_a @ first_b + second_b)
    after_firsts = first_a @ _one_chunk_later(after_pairs) + first_b
    states = torch.stack([after_firsts, after_pairs], dim=-3).flatten(-4, -3)  # interleaved back in order
    return states[..., :count, :, :]


def bidirectional_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    decay: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    chunk_size: int = CHUNK,
) -> torch.Tensor:
    """The (gated, with `decay`) delta rule run forward and backward over the sequence, averaged.

    DNA has no direction, and a causal scan lets a token read only what precedes it: the
    backward scan, the same rule over the reversed sequence (as Caduceus runs Mamba both
    ways), lets it read what follows. Both share q, k, v, beta and decay. Padding at either
    end, reversed, still neither writes nor is read. [B, H, T, D] in q's dtype.
    """
    if scan_kernel(q.device) == CPP_KERNEL:  # both scans in one call, on the sequence as it is
        return _in_compute_dtype(
            lambda *prepared: delta_rule_kernel.recurrent_gated_delta_rule(*prepared, both_ways=True),
            q,
            k,
            v,
            beta,
            decay,
            key_padding_mask,
        )
    # Both scans as one batch of twice the size: one pass of the chunked maths instead of two.
    both = [torch.cat([x, x.flip(2)]) for x in (q, k, v, beta)]
    decays = None if decay is None else torch.cat([decay, decay.flip(2)])
    masks = None if key_padding_mask is None else torch.cat([key_padding_mask, key_padding_mask.flip(1)])
    forward, backward = gated_delta_rule(*both, decays, masks, chunk_size).chunk(2)
    return (forward + backward.flip(2)) / 2


def naive_delta_rule(q, k, v, beta, key_padding_mask=None) -> torch.Tensor:
    """The delta rule token by token: the reference `delta_rule` is tested against."""
    return naive_gated_delta_rule(q, k, v, beta, None, key_padding_mask)


def naive_gated_delta_rule(q, k, v, beta, decay, key_padding_mask=None) -> torch.Tensor:
    """The gated delta rule token by token (module docstring's recurrence): the reference for tests."""
    compute = torch.promote_types(q.dtype, torch.float32)
    q, k, v, beta, log_decay = _prepared(q, k, v, beta, decay, key_padding_mask, compute)
    state = q.new_zeros(q.shape[0], q.shape[1], q.shape[-1], v.shape[-1])
    outputs = []
    for t in range(q.shape[2]):
        state = state * log_decay[:, :, t].exp()[..., None, None]
        key = k[:, :, t]
        error = v[:, :, t] - (state * key[..., None]).sum(-2)  # v_t - S^T k_t
        state = state + beta[:, :, t][..., None, None] * key[..., None] * error[..., None, :]
        outputs.append((state * q[:, :, t][..., None]).sum(-2))  # S^T q_t
    return torch.stack(outputs, dim=2)
