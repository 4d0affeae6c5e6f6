"""The delta rule and the gated delta rule: the chunked ops against their token-by-token references,
against flash-linear-attention's own references (when fla-core is installed), and their masks."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from epiformer.model import delta_rule as delta_rule_module
from epiformer.model.delta_rule import (
    bidirectional_delta_rule,
    chunk_states,
    delta_rule,
    gated_delta_rule,
    naive_delta_rule,
    naive_gated_delta_rule,
)
from tests.helpers import tensor_shapes_during

GATED = [False, True]


@pytest.fixture(autouse=True)
def chunked_scan(monkeypatch):
    """These tests are of the chunked PyTorch scan, whatever EPIFORMER_DELTA_KERNEL the shell holds."""
    monkeypatch.delenv(delta_rule_module.KERNEL_VARIABLE, raising=False)


def rule_id(gated: bool) -> str:
    return "gated" if gated else "delta"


def random_inputs(shape, gated: bool, dtype=torch.float64, seed=0):
    """q, k, v [B, H, T, D], beta [B, H, T] in (0, 1) and, gated, decay in (0, 1), all requiring grad."""
    batch, heads, length, _ = shape
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=generator, dtype=dtype) for _ in range(3))
    beta = torch.rand((batch, heads, length), generator=generator, dtype=dtype) * 0.98 + 0.01
    decay = torch.rand((batch, heads, length), generator=generator, dtype=dtype) * 0.5 + 0.5 if gated else None
    inputs = [q, k, v, beta] + ([decay] if gated else [])
    return [x.requires_grad_() for x in inputs]


def run(gated: bool, inputs, mask=None, chunk_size=None, naive=False):
    if naive:
        return naive_gated_delta_rule(*inputs, mask) if gated else naive_delta_rule(*inputs, mask)
    extra = {} if chunk_size is None else {"chunk_size": chunk_size}
    return gated_delta_rule(*inputs, mask, **extra) if gated else delta_rule(*inputs, mask, **extra)


def right_padding(batch: int, length: int, valid: list[int]) -> torch.Tensor:
    return torch.arange(length)[None, :] >= torch.tensor(valid)[:, None]


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
@pytest.mark.parametrize("length, chunk", [(1, 4), (7, 4), (8, 4), (9, 4), (33, 16), (64, 64), (65, 64), (130, 64)])
def test_the_chunked_rule_equals_the_token_by_token_one_with_its_gradients(gated, length, chunk):
    inputs = random_inputs((2, 3, length, 8), gated)
    mask = right_padding(2, length, [length, max(1, length - 5)])
    out = run(gated, inputs, mask, chunk)
    reference = run(gated, inputs, mask, naive=True)
    valid = ~mask[:, None, :, None]
    assert torch.allclose(out * valid, reference * valid, atol=1e-10, rtol=1e-9)
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3)) * valid
    gradients = torch.autograd.grad((out * weights).sum(), inputs)
    expected = torch.autograd.grad((reference * weights).sum(), inputs)
    for got, want in zip(gradients, expected):
        assert torch.allclose(got, want, atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
@pytest.mark.parametrize("scan", [True, False], ids=["scan", "loop"])
def test_the_chunked_rule_passes_gradcheck_in_float64(gated, scan, monkeypatch):
    monkeypatch.setattr(delta_rule_module, "scans_across_chunks", lambda dim: scan)
    chunk = 4
    inputs = random_inputs((1, 2, 23, 4), gated, seed=5)
    mask = right_padding(1, 23, [21])
    assert torch.autograd.gradcheck(lambda *x: run(gated, x, mask, chunk), inputs)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_the_scan_across_chunks_and_the_loop_give_the_same_outputs_and_gradients(gated, monkeypatch):
    inputs = random_inputs((2, 2, 100, 8), gated, seed=9)  # 7 chunks of 16: an odd count at every level
    mask = right_padding(2, 100, [100, 77])
    results = {}
    for scan in (True, False):
        monkeypatch.setattr(delta_rule_module, "scans_across_chunks", lambda dim, scan=scan: scan)
        out = run(gated, inputs, mask, 16)
        results[scan] = (out, *torch.autograd.grad(out.square().sum(), inputs))
    for by_scan, by_loop in zip(results[True], results[False]):
        assert torch.allclose(by_scan, by_loop, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_decays_factored_over_rows_and_columns_equal_each_pairs_own_decay(gated, monkeypatch):
    inputs = random_inputs((2, 2, 70, 8), gated, seed=4)
    mask = right_padding(2, 70, [70, 51])
    results = {}
    for factored in (True, False):  # a bound of -1 sends every chunk down the exact path
        monkeypatch.setattr(delta_rule_module, "FACTORED_LOG_DECAY", 80.0 if factored else -1.0)
        out = run(gated, inputs, mask, 16)
        results[factored] = (out, *torch.autograd.grad(out.square().sum(), inputs))
    for factored, exact in zip(results[True], results[False]):
        assert torch.allclose(factored, exact, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("count", [1, 2, 5, 8, 13])
def test_chunk_states_solve_the_affine_recurrence_from_a_zero_state(count):
    generator = torch.Generator().manual_seed(count)
    transition = torch.randn(2, count, 3, 3, generator=generator, dtype=torch.float64) * 0.5
    written = torch.randn(2, count, 3, 4, generator=generator, dtype=torch.float64)
    state, expected = torch.zeros(2, 3, 4, dtype=torch.float64), []
    for n in range(count):
        expected.append(state)
        state = transition[:, n] @ state + written[:, n]
    assert torch.allclose(chunk_states(transition, written), torch.stack(expected, dim=1), atol=1e-12)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_both_ways_is_the_mean_of_the_forward_scan_and_the_scan_of_the_reversed_sequence(gated):
    inputs = random_inputs((2, 2, 21, 4), gated, seed=11)
    mask = right_padding(2, 21, [21, 15])
    out = bidirectional_delta_rule(*inputs[:4], inputs[4] if gated else None, mask, chunk_size=8)
    flipped = [x.flip(2) for x in inputs]
    forward = run(gated, inputs, mask, naive=True)
    backward = run(gated, flipped, mask.flip(1), naive=True).flip(2)
    valid = ~mask[:, None, :, None]
    expected = (forward + backward) / 2
    assert torch.allclose(out * valid, expected * valid, atol=1e-10)
    gradients = torch.autograd.grad((out * valid).sum(), inputs)
    for got, want in zip(gradients, torch.autograd.grad((expected * valid).sum(), inputs)):
        assert torch.allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_in_float32_over_many_chunks_the_chunked_rule_stays_within_1e5_of_the_reference(gated):
    inputs = [x.detach().float().requires_grad_() for x in random_inputs((2, 2, 333, 16), gated, seed=7)]
    mask = right_padding(2, 333, [333, 250])
    out, reference = run(gated, inputs, mask), run(gated, inputs, mask, naive=True)
    valid = ~mask[:, None, :, None]
    assert out.dtype == torch.float32
    assert (out - reference).mul(valid).abs().max() < 1e-5
    gradients = torch.autograd.grad((out * valid).sum(), inputs)
    expected = torch.autograd.grad((reference * valid).sum(), inputs)
    for got, want in zip(gradients, expected):
        assert (got - want).abs().max() < 1e-5 * max(1.0, want.abs().max().item())


@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_a_padded_token_neither_writes_nor_is_read(gated):
    inputs = random_inputs((2, 2, 40, 8), gated, seed=9)
    mask = torch.zeros(2, 40, dtype=torch.bool)
    mask[0, 10:15] = True  # a gap inside the sequence
    mask[1, 30:] = True  # right padding
    out = run(gated, inputs, mask, 16)
    # Other values at the padded tokens change no valid output.
    changed = [x.detach().clone() for x in inputs]
    for x in changed[:3]:
        x[0, :, 10:15] = torch.randn_like(x[0, :, 10:15]) * 10
    for x in changed[3:]:
        x[0, :, 10:15] = 0.5
    again = run(gated, changed, mask, 16)
    valid = ~mask[:, None, :, None]
    assert torch.allclose(out * valid, again * valid, atol=1e-12)
    # The same as the sequence without its padded tokens.
    keep = ~mask[0]
    shorter = [x.detach()[:1, :, keep] for x in inputs]
    assert torch.allclose(out[:1, :, keep], run(gated, shorter, None, 16), atol=1e-12)
    gradients = torch.autograd.grad((out * valid).sum(), inputs)
    for gradient in gradients:
        assert gradient[0, :, 10:15].abs().max() == 0 and gradient[1, :, 30:].abs().max() == 0


def test_the_delta_rule_is_the_gated_rule_that_keeps_everything():
    q, k, v, beta = random_inputs((1, 2, 20, 4), False, seed=11)
    keep_all = torch.ones_like(beta)
    gated = gated_delta_rule(q, k, v, beta, keep_all, chunk_size=8)
    assert torch.allclose(delta_rule(q, k, v, beta, chunk_size=8), gated)


def test_a_token_written_with_full_strength_is_read_back_exactly():
    # beta = 1 replaces what the state held for that key (the delta rule's point): reading the same key returns v.
    dim = 4
    keys = torch.eye(dim, dtype=torch.float64)[None, None]  # orthonormal keys, one per token
    values = torch.randn(1, 1, dim, dim, dtype=torch.float64)
    beta = torch.ones(1, 1, dim, dtype=torch.float64)
    out = delta_rule(keys, keys, values, beta, chunk_size=2)
    assert torch.allclose(out, values * dim**-0.5, atol=1e-12)  # q is scaled by D^-1/2
    twice = torch.cat([keys, keys], dim=2), torch.cat([values, 2 * values], dim=2)
    out = delta_rule(twice[0], twice[0], twice[1], torch.ones(1, 1, 2 * dim, dtype=torch.float64), chunk_size=3)
    assert torch.allclose(out[:, :, dim:], 2 * values * dim**-0.5, atol=1e-12)  # overwritten, not added


def test_no_tensor_grows_with_the_square_of_the_length():
    length = 2048
    inputs = [x.detach().float().requires_grad_() for x in random_inputs((1, 2, length, 8), True, seed=13)]
    shapes = tensor_shapes_during(lambda: gated_delta_rule(*inputs, chunk_size=64).sum().backward())
    assert shapes and all(sum(size >= length for size in shape) < 2 for _, shape in shapes)  # forward and backward
    assert max(math.prod(shape) for _, shape in shapes) <= 2 * 64 * length * 8  # O(T (C + D) D), not T^2


VIEWS = {
    "select",
    "view",
    "t",
    "transpose",
    "expand",
    "detach",
    "slice",
    "unbind",
    "as_strided",
    "permute",
    "unsqueeze",
}


def work_of(length: int) -> int:
    """Elements of every tensor the gated rule's forward and backward touch at this length, views left out."""
    inputs = [x.detach().float().requires_grad_() for x in random_inputs((1, 2, length, 8), True, seed=21)]
    shapes = tensor_shapes_during(lambda: gated_delta_rule(*inputs, chunk_size=32).sum().backward())
    return sum(math.prod(shape) for op, shape in shapes if op.split(".")[1] not in VIEWS)


def test_the_work_of_forward_and_backward_grows_linearly_with_the_length():
    # Taking each chunk by indexing inside the loop made the backward write a whole-sequence gradient per chunk.
    assert work_of(4096) / work_of(1024) < 4.5


def test_under_bf16_autocast_the_rule_computes_in_float32():
    inputs = [x.detach().float() for x in random_inputs((1, 2, 50, 8), True, seed=15)]
    reference = gated_delta_rule(*inputs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = gated_delta_rule(*[x.to(torch.bfloat16) if x.dim() == 4 else x for x in inputs])
    assert out.dtype == torch.bfloat16
    assert (out.float() - reference).abs().max() < 0.05  # only the bf16 inputs and output round


# flash-linear-attention's own references (fla-core, MIT): pure PyTorch, loaded from their files so that
# fla's package, which needs Triton, is not imported.
FLA = importlib.util.find_spec("fla")


def fla_reference(relative: str):
    if FLA is None:
        pytest.skip("fla-core is not installed (pip install fla-core einops)")
    path = Path(FLA.submodule_search_locations[0]) / relative
    spec = importlib.util.spec_from_file_location(f"fla_reference_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def normalised(q, k):
    return F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)


def test_the_delta_rule_equals_flash_linear_attentions_reference():
    reference = fla_reference("ops/delta_rule/naive.py")
    q, k, v, beta = (x.detach().float() for x in random_inputs((2, 3, 70, 16), False, seed=17))
    expected, _ = reference.delta_rule_recurrence(*normalised(q, k), v, beta)
    assert (delta_rule(q, k, v, beta) - expected).abs().max() < 1e-5


def test_the_gated_delta_rule_equals_flash_linear_attentions_reference():
    reference = fla_reference("ops/gated_delta_rule/naive.py")
    q, k, v, beta, decay = (x.detach().float() for x in random_inputs((2, 3, 70, 16), True, seed=19))
    nq, nk = normalised(q, k)
    to_fla = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731  fla's layout: [B, T, H, ...]
    expected, _ = reference.naive_recurrent_gated_delta_rule(
        to_fla(nq), to_fla(nk), to_fla(v), to_fla(beta), to_fla(decay.log())
    )
    assert (gated_delta_rule(q, k, v, beta, decay) - expected.transpose(1, 2)).abs().max() < 1e-5
    chunked, _ = reference.naive_chunk_gated_delta_rule(
        to_fla(nq), to_fla(nk), to_fla(v), to_fla(decay.log()), to_fla(beta), chunk_size=32
    )
    assert (gated_delta_rule(q, k, v, beta, decay, chunk_size=32) - chunked.transpose(1, 2)).abs().max() < 1e-5


# fla's Triton kernel on a GPU: the arguments the model hands it, checked on the CPU through fla's own
# chunked reference, which takes the same arguments (q, k, v, g, beta, scale) in the same layout.
@pytest.mark.parametrize("gated", GATED, ids=rule_id)
def test_the_arguments_handed_to_flas_kernel_give_the_models_rule_with_padding(gated):
    reference = fla_reference("ops/gated_delta_rule/naive.py")
    inputs = [x.detach().float() for x in random_inputs((2, 3, 75, 16), gated, seed=23)]
    if not gated:
        inputs.append(None)
    mask = right_padding(2, 75, [75, 41])
    prepared = delta_rule_module._prepared(*inputs, mask, torch.float32)
    by_fla = delta_rule_module.through_fla(reference.naive_chunk_gated_delta_rule, *prepared)
    assert by_fla.shape == inputs[0].shape
    assert (by_fla - run(gated, inputs[:5] if gated else inputs[:4], mask)).abs().max() < 1e-5


def test_the_pytorch_path_serves_on_the_cpu_and_fla_refuses_it_clearly(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv(delta_rule_module.KERNEL_VARIABLE, raising=False)
    assert delta_rule_module.scan_kernel(torch.device("cuda")) is None  # the default, on a GPU too
    assert delta_rule_module.scan_kernel(cpu) is None
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "torch")
    assert delta_rule_module.scan_kernel(cpu) is None  # "auto" on the CPU: tests/model/test_delta_rule_kernel.py
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "fla")
    with pytest.raises(RuntimeError, match="needs a CUDA device .*pip install fla-core.*device cpu"):
        delta_rule_module.scan_kernel(cpu)
    monkeypatch.setenv(delta_rule_module.KERNEL_VARIABLE, "triton")
    with pytest.raises(ValueError, match="EPIFORMER_DELTA_KERNEL='triton': expected one of torch, cpp, fla, auto"):
        delta_rule_module.scan_kernel(cpu)


def test_a_decay_of_zero_forgets_everything_before_it_instead_of_turning_into_nan():
    # exp(-softplus(z)) underflows to exactly 0 in float32 for large z: the state is then wiped.
    q, k, v, beta, decay = (x.detach().float() for x in random_inputs((1, 2, 70, 8), True, seed=29))
    decay[:, :, 40] = 0.0
    out = gated_delta_rule(q, k, v, beta, decay)
    assert torch.isfinite(out).all()
    restarted = gated_delta_rule(*(x[:, :, 40:] for x in (q, k, v, beta, decay)))
    assert (out[:, :, 40:] - restarted).abs().max() < 1e-5
