import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from epiformer.model.ops import (
    elu_feature_map,
    linear_attention,
    naive_linear_attention,
    naive_softmax_attention,
    softmax_attention,
)
from epiformer.model.scaling import measure_in_fresh_process
from tests.helpers import quadratic_tensors, tensor_shapes_during

SHAPES = [(1, 1, 1, 4), (2, 3, 1, 1), (1, 1, 7, 1), (2, 4, 17, 8), (3, 1, 33, 5), (1, 8, 64, 16)]
PAIRS = [(linear_attention, naive_linear_attention), (softmax_attention, naive_softmax_attention)]
MASKS = ["none", "random", "all but one"]


def shape_id(shape) -> str:
    return "B{}-H{}-T{}-D{}".format(*shape)


def function_id(function) -> str:
    return function.__name__


def pair_id(pair) -> str:
    return pair[0].__name__.removesuffix("_attention")


def random_qkv(shape, dtype=torch.float64, seed=0, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype).to(device).requires_grad_() for _ in range(3)]


def make_mask(kind, batch, length, device="cpu", seed=1):
    if kind == "none":
        return None
    if kind == "random":
        mask = torch.rand(batch, length, generator=torch.Generator().manual_seed(seed)) < 0.3
    else:
        mask = torch.ones(batch, length, dtype=torch.bool)
    mask[:, length // 2] = False  # at least one valid key per row
    return mask.to(device)


def outputs_and_grads(function, q, k, v, mask):
    """Output and the gradients for a fixed random upstream gradient of unit scale."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = function(q, k, v, key_padding_mask=mask)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return [out, *torch.autograd.grad(out, (q, k, v), grad_outputs=upstream.to(out.device, out.dtype))]


@pytest.mark.parametrize("fast, naive", PAIRS, ids=[pair_id(pair) for pair in PAIRS])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("mask_kind", MASKS)
def test_float32_matches_the_float64_naive_reference_within_1e5(fast, naive, shape, mask_kind, device):
    mask = make_mask(mask_kind, shape[0], shape[2], device)
    q, k, v = random_qkv(shape, torch.float64, device=device)
    reference = outputs_and_grads(naive, q, k, v, mask)
    exact = outputs_and_grads(fast, q, k, v, mask)
    fast32 = outputs_and_grads(fast, q.float(), k.float(), v.float(), mask)
    for got64, got32, want in zip(exact, fast32, reference):
        torch.testing.assert_close(got64, want)  # float64: equal to rounding
        assert (got32.double() - want).abs().max() <= 1e-5


@pytest.mark.parametrize("fast, naive", PAIRS, ids=[pair_id(pair) for pair in PAIRS])
@pytest.mark.parametrize("mask_kind", MASKS)
def test_bfloat16_stays_within_a_stated_tolerance(fast, naive, mask_kind, device):
    """bf16 keeps 8 bits of mantissa: outputs within 0.05 absolute of the float64 reference."""
    shape = (2, 4, 40, 16)
    mask = make_mask(mask_kind, shape[0], shape[2], device)
    q, k, v = random_qkv(shape, torch.float64, device=device)
    want = naive(q, k, v, key_padding_mask=mask)
    got = fast(q.bfloat16(), k.bfloat16(), v.bfloat16(), key_padding_mask=mask)
    assert got.dtype == torch.bfloat16
    assert (got.double() - want).abs().max() <= 0.05


@pytest.mark.parametrize("attention", [linear_attention, softmax_attention], ids=function_id)
def test_padded_keys_contribute_nothing(attention):
    q, k, v = (t.detach() for t in random_qkv((2, 2, 10, 8)))
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[:, 6:] = True
    out = attention(q, k, v, key_padding_mask=mask)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 6:], v2[:, :, 6:] = 1e3, -1e3  # garbage at padding must not matter
    torch.testing.assert_close(attention(q, k2, v2, key_padding_mask=mask), out)
    torch.testing.assert_close(attention(q[:, :, :6], k[:, :, :6], v[:, :, :6])[:, :, :6], out[:, :, :6])


LONG = 4096  # tokens: 256 times the head size, so any T x T tensor dwarfs every tensor linear attention needs


def tensors_of_forward_and_backward(attention, mask_kind, backward=True):
    """Every tensor an operator takes or returns while `attention` runs forward (and backward) at T = LONG, D = 16."""
    q, k, v = random_qkv((1, 2, LONG, 16), torch.float32)
    mask = make_mask(mask_kind, 1, LONG)
    if not backward:
        return tensor_shapes_during(lambda: attention(q, k, v, key_padding_mask=mask))
    return tensor_shapes_during(lambda: attention(q, k, v, key_padding_mask=mask).sum().backward())


@pytest.mark.parametrize("mask_kind", ["none", "random"])
def test_linear_attention_never_forms_a_t_by_t_matrix(mask_kind):
    shapes = tensors_of_forward_and_backward(linear_attention, mask_kind)
    # The backward pass was recorded too (it is hand-written, so its operators are plain bmm, mul, ...).
    assert len(shapes) > len(tensors_of_forward_and_backward(linear_attention, mask_kind, backward=False))
    assert quadratic_tensors(shapes, LONG) == []
    assert max(math.prod(shape) for _, shape in shapes) <= 2 * LONG * (16 + 1)  # (B, H, T, D + 1): linear in T


def explicit_softmax_attention(q, k, v, key_padding_mask=None):
    """softmax_attention through SDPA's math backend, which forms the T x T weights as tensors."""
    with sdpa_kernel(SDPBackend.MATH):
        return softmax_attention(q, k, v, key_padding_mask=key_padding_mask)


@pytest.mark.parametrize(
    "attention", [naive_linear_attention, naive_softmax_attention, explicit_softmax_attention], ids=function_id
)
@pytest.mark.parametrize("mask_kind", ["none", "random"])
def test_the_t_by_t_check_finds_the_matrix_where_attention_forms_one(attention, mask_kind):
    """The check above can fail: it finds the [B, H, T, T] weights of explicit attention.

    (PyTorch's fused CPU kernel for softmax attention, which the model's softmax twin uses,
    works through T x T in tiles inside one operator and never holds the whole matrix either;
    its time, not its memory, is what grows as T^2.)
    """
    shapes = tensors_of_forward_and_backward(attention, mask_kind)
    assert any(LONG in shape[-2:] and shape[-1] == shape[-2] for _, shape in quadratic_tensors(shapes, LONG))


def test_linear_attention_peak_memory_grows_linearly_in_t():
    small = measure_in_fresh_process("attention", "linear", 25_000, repeats=1, device="cpu")
    large = measure_in_fresh_process("attention", "linear", 100_000, repeats=1, device="cpu")
    assert large["peak_mb"] / small["peak_mb"] < 6  # 4x tokens: ~4x memory (quadratic would be 16x)
    assert large["peak_mb"] < 1024  # one T x T matrix alone would be 40,000 MB


def test_linear_attention_keeps_float32_normaliser_under_bf16_autocast(device):
    q, k, v = (t.detach().float() for t in random_qkv((1, 2, 300, 8), device=device))
    reference = linear_attention(q, k, v)
    q16, k16, v16 = q.bfloat16(), k.bfloat16(), v.bfloat16()
    with torch.autocast(device, dtype=torch.bfloat16):
        out = linear_attention(q16, k16, v16)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, atol=0.05, rtol=0.05)
    # Exactly float32 arithmetic on the bf16 inputs, rounded to bf16 once at the end ...
    in_float32 = linear_attention(q16.float(), k16.float(), v16.float()).bfloat16()
    torch.testing.assert_close(out, in_float32, atol=0, rtol=0)
    # ... which bf16 arithmetic (what autocast would otherwise do to the two products) is not.
    phi_q, phi_k = elu_feature_map(q16), elu_feature_map(k16)
    products = phi_q @ (phi_k.transpose(-1, -2) @ F.pad(v16, (0, 1), value=1.0))  # (B, H, T, D + 1), bf16
    assert not torch.equal(products[..., :-1] / (products[..., -1:] + 1e-6), in_float32)


GRADCHECK_SHAPES = [(1, 1, 3, 2), (2, 3, 5, 4)]


@pytest.mark.parametrize("shape", GRADCHECK_SHAPES, ids=shape_id)
@pytest.mark.parametrize("mask_kind", MASKS)
def test_linear_attention_backward_passes_gradcheck(shape, mask_kind):
    """The hand-written backward against finite differences, in float64."""
    mask = make_mask(mask_kind, shape[0], shape[2])
    q, k, v = random_qkv(shape)
    assert torch.autograd.gradcheck(lambda q, k, v: linear_attention(q, k, v, key_padding_mask=mask), (q, k, v))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("mask_kind", MASKS)
def test_linear_attention_gradcheck_on_the_model_layout(batch, mask_kind):
    """q, k, v as the model passes them: strided views of one [B, T, 3, H, D] projection.

    At B = 1 the op works on views of it, at B = 2 on copies; the upstream gradient the
    model's transpose hands back is strided too.
    """
    heads, length, dim = 2, 6, 3
    qkv = torch.randn(batch, length, 3, heads, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    mask = make_mask(mask_kind, batch, length)

    def attend(qkv):
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, D)
        return linear_attention(q, k, v, key_padding_mask=mask).transpose(1, 2)  # (B, T, H, D), strided

    assert torch.autograd.gradcheck(attend, (qkv.requires_grad_(),))


def test_linear_attention_refuses_double_backward_by_name():
    q, k, v = random_qkv((1, 1, 4, 2))
    # A squared loss, so that the gradient reaching the op depends on q, k, v too.
    grads = torch.autograd.grad(linear_attention(q, k, v).square().sum(), (q, k, v), create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grads[0].sum().backward()


@pytest.mark.parametrize("mask_kind", MASKS)
def test_linear_attention_backward_stays_float32_under_bf16_autocast(mask_kind):
    """Gradients under autocast equal float32 arithmetic on the bf16 numbers, rounded once to bf16."""
    shape = (2, 2, 50, 8)
    mask = make_mask(mask_kind, shape[0], shape[2])
    q, k, v = (t.detach().bfloat16().requires_grad_() for t in random_qkv(shape))
    upstream = torch.randn(shape, generator=torch.Generator().manual_seed(7)).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = linear_attention(q, k, v, key_padding_mask=mask)
        grads = torch.autograd.grad(out, (q, k, v), upstream)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    out32 = linear_attention(q32, k32, v32, key_padding_mask=mask)
    grads32 = torch.autograd.grad(out32, (q32, k32, v32), upstream.float())
    for got, want in zip(grads, grads32):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got, want.bfloat16(), atol=0, rtol=0)


def test_linear_attention_under_torch_compile_matches_eager():
    """train.compile: true traces the op into the model's graph: same output and gradients, masked, at B = 2."""
    batch, heads, length, dim = 2, 2, 9, 4
    qkv = torch.randn(batch, length, 3, heads, dim, generator=torch.Generator().manual_seed(5))
    upstream = torch.randn(batch, heads, length, dim, generator=torch.Generator().manual_seed(6))
    mask = make_mask("random", batch, length)

    def attend(qkv):
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, T, D), strided as in the model
        return linear_attention(q, k, v, key_padding_mask=mask)

    results = []
    for function in (attend, torch.compile(attend)):
        leaf = qkv.clone().requires_grad_()
        out = function(leaf)
        results.append((out, *torch.autograd.grad(out, leaf, upstream)))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want)
