import pytest
import torch

from epiformer.ops import linear_attention, naive_linear_attention, naive_softmax_attention, softmax_attention

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"))]
SHAPES = [(1, 1, 1, 4), (2, 4, 17, 8), (3, 2, 64, 16), (1, 8, 5, 32)]
PAIRS = [(linear_attention, naive_linear_attention), (softmax_attention, naive_softmax_attention)]


def random_qkv(shape, dtype=torch.float64, seed=0, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype).to(device).requires_grad_() for _ in range(3)]


def random_mask(batch, length, seed=1):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(batch, length, generator=generator) < 0.3
    mask[:, 0] = False  # at least one valid key per row
    return mask


@pytest.mark.parametrize("fast, naive", PAIRS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("device", DEVICES)
def test_matches_naive_reference_in_outputs_and_gradients(fast, naive, shape, masked, dtype, device):
    mask = random_mask(shape[0], shape[2]).to(device) if masked else None
    q, k, v = random_qkv(shape, dtype, device=device)
    out = fast(q, k, v, key_padding_mask=mask)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref = naive(q2, k2, v2, key_padding_mask=mask)
    ref_grads = torch.autograd.grad(ref.square().sum(), (q2, k2, v2))
    tolerance = {} if dtype == torch.float64 else {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(out, ref, **tolerance)
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, **tolerance)


@pytest.mark.parametrize("attention", [linear_attention, softmax_attention])
def test_padded_keys_contribute_nothing(attention):
    q, k, v = (t.detach() for t in random_qkv((2, 2, 10, 8)))
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[:, 6:] = True
    out = attention(q, k, v, key_padding_mask=mask)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 6:], v2[:, :, 6:] = 1e3, -1e3  # garbage at padding must not matter
    torch.testing.assert_close(attention(q, k2, v2, key_padding_mask=mask), out)
    torch.testing.assert_close(attention(q[:, :, :6], k[:, :, :6], v[:, :, :6])[:, :, :6], out[:, :, :6])


def test_linear_attention_never_forms_a_t_by_t_matrix():
    # T = 100,000: a T x T float32 matrix would need 40 GB; the linear path needs a few MB.
    q, k, v = (torch.randn(1, 1, 100_000, 8) for _ in range(3))
    out = linear_attention(q, k, v)
    assert out.shape == (1, 1, 100_000, 8) and torch.isfinite(out).all()


@pytest.mark.parametrize("device", DEVICES)
def test_linear_attention_keeps_float32_normaliser_under_bf16_autocast(device):
    q, k, v = (t.detach().float() for t in random_qkv((1, 2, 300, 8), device=device))
    reference = linear_attention(q, k, v)
    with torch.autocast(device, dtype=torch.bfloat16):
        out = linear_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, atol=0.05, rtol=0.05)
