"""Attention as pure functions: kernelised linear attention (M7) and softmax attention.

Shapes: q, k, v are [B, H, T, D]; `key_padding_mask` is bool [B, T], True at padding.
Outputs are [B, H, T, D]. Padded keys contribute nothing; outputs at padded query
positions are defined but meaningless (the model pools only valid tokens).

The `naive_*` functions build the explicit T x T weights. They exist as references for
tests and must never be used in the model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = ELU(x) + 1: positive, so the linear-attention normaliser never vanishes."""
    return F.elu(x) + 1


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None = None, eps: float = 1e-6
) -> torch.Tensor:
    """phi(q) (phi(k)^T v) / (phi(q) (phi(k)^T 1) + eps) with phi = elu + 1.

    q, k, v: [B, H, T, D], any strides (the model passes views of one qkv projection);
    key_padding_mask: bool [B, T], True at padding. Returns [B, H, T, D], contiguous, in q's
    dtype. O(T * D^2) time and O(T * D + D^2) memory: the [D, D] key-value summary is formed
    first, so no T x T tensor ever exists. Computed in (at least) float32 even under
    autocast: the normaliser is a sum over all T keys and loses precision in bf16. Forward
    and backward are written out by hand in `_LinearAttention` (six matrix products and a
    few passes over the sequence); `naive_linear_attention` is the reference it is tested
    against. Not twice differentiable.
    """
    dtype = q.dtype
    compute = torch.promote_types(dtype, torch.float32)  # bf16/fp16 -> fp32; fp64 stays fp64
    with torch.autocast(device_type=q.device.type, enabled=False):
        out = _LinearAttention.apply(q.to(compute), k.to(compute), v.to(compute), key_padding_mask, eps)
    return out.to(dtype)


def _feature_map_and_slope(x: torch.Tensor, padding: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """phi(x) = elu(x) + 1 and its derivative phi'(x), both contiguous, whatever the strides of x.

    phi(x) = max(x, 0) + exp(min(x, 0)), and exp(min(x, 0)) is phi'(x) (1 where x > 0), so
    the slope comes free with the value; F.elu's kernel (through expm1) alone takes about
    twice as long as this clamp, exp, clamp, add. Rows at `padding` (bool [B, T], True at
    padding) are zero in both: a padded key drops out of every sum and gets no gradient.
    """
    compiling = torch.compiler.is_compiling()
    if compiling:
        # Under torch.compile (train.compile: true) out= buffers do not keep the layout they were
        # allocated with, and inductor fuses these four operations into one pass anyway.
        slope = torch.exp(torch.clamp(x, max=0.0)).contiguous()
        phi = (torch.clamp(x, min=0.0) + slope).contiguous()
    else:
        slope = torch.clamp(x, max=0.0, out=x.new_empty(x.shape)).exp_()  # (B, H, T, D)
        phi = torch.clamp(x, min=0.0, out=x.new_empty(x.shape)).add_(slope)
    if padding is not None and x.device.type == "cpu" and not compiling:
        # Index only the padded (b, t) rows, so the cost grows with the padding, not with T.
        phi.transpose(1, 2)[padding] = 0.0  # (B, T, H, D) view, indexed by the [B, T] mask
        slope.transpose(1, 2)[padding] = 0.0
    elif padding is not None:
        # On a GPU, indexing by a mask waits for the device to count it; a full pass does not
        # (and compiled graphs stay whole).
        phi.masked_fill_(padding[:, None, :, None], 0.0)
        slope.masked_fill_(padding[:, None, :, None], 0.0)
    return phi, slope


class _LinearAttention(torch.autograd.Function):
    """linear_attention in one dtype, without autocast, with a hand-written backward.

    Autograd through the plain expression keeps a (D + 1)-wide copy of v, slices, and
    elementwise intermediates it then walks back through; here each [T, D] tensor is
    written once, batched matrix products run on [B * H, T, D] operands (contiguous buffers;
    v and the upstream gradient as views where their strides allow), and the backward
    reuses what the forward made:
        den = phi_q ksum + eps,  r = phi_q / den,  out = r kv,
        kv = phi_k^T v,  ksum = phi_k^T 1.
    With c = rowsum(g * out), the gradients are
        dkv = r^T g,  dksum = -r^T c,  dq = (g kv^T - c ksum^T) * phi'(q) / den,
        dk = (v dkv^T + dksum^T) * phi'(k),  dv = phi_k dkv.
    """

    @staticmethod
    def forward(ctx, q, k, v, key_padding_mask, eps):
        batch, heads, length, dim = q.shape
        rows = batch * heads
        phi_q, slope_q = _feature_map_and_slope(q, None)  # (B, H, T, D) each
        phi_k, slope_k = _feature_map_and_slope(k, key_padding_mask)
        phi_q, slope_q = phi_q.reshape(rows, length, dim), slope_q.reshape(rows, length, dim)
        phi_k, slope_k = phi_k.reshape(rows, length, dim), slope_k.reshape(rows, length, dim)
        values = v.reshape(rows, length, dim)  # a view for the model's layout at B = 1, else one copy
        kv = torch.bmm(phi_k.transpose(1, 2), values)  # (B*H, D, D)
        ksum = phi_k.sum(dim=1, keepdim=True)  # (B*H, 1, D)
        den = torch.bmm(phi_q, ksum.transpose(1, 2)).add_(eps)  # (B*H, T, 1)
        r = phi_q.div_(den)  # phi_q itself is not needed again
        slope_q.div_(den)  # dq needs phi'(q) / den
        out = torch.bmm(r, kv)  # (B*H, T, D)
        ctx.save_for_backward(r, slope_q, phi_k, slope_k, values, kv, ksum, out)
        return out.reshape(batch, heads, length, dim)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        r, slope_q, phi_k, slope_k, values, kv, ksum, out = ctx.saved_tensors
        shape = grad_out.shape
        with torch.autocast(device_type=grad_out.device.type, enabled=False):
            grad = grad_out.reshape(out.shape)  # (B*H, T, D); a view where the strides allow
            # Row-wise dot products (B*H, T, 1): einsum runs them as one batched product, not a multiply and a sum.
            c = torch.einsum("ntd,ntd->nt", grad, out).unsqueeze(-1)
            grad_q = torch.bmm(grad, kv.transpose(1, 2)).addcmul_(c, ksum, value=-1.0).mul_(slope_q)
            grad_kv = torch.bmm(r.transpose(1, 2), grad)  # (B*H, D, D)
            grad_ksum = torch.bmm(r.transpose(1, 2), c).neg_()  # (B*H, D, 1)
            # The bias added after the product, not by baddbmm: that copies it into every row first.
            grad_k = torch.bmm(values, grad_kv.transpose(1, 2)).add_(grad_ksum.transpose(1, 2)).mul_(slope_k)
            grad_v = torch.bmm(phi_k, grad_kv)
        return grad_q.reshape(shape), grad_k.reshape(shape), grad_v.reshape(shape), None, None


def softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Standard scaled dot-product attention with the same mask semantics."""
    attn_mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]  # (B, 1, 1, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def naive_linear_attention(q, k, v, key_padding_mask=None, eps: float = 1e-6) -> torch.Tensor:
    """The reference for `linear_attention`: the T x T weights phi(q) phi(k)^T formed explicitly, O(T^2)."""
    weights = elu_feature_map(q) @ elu_feature_map(k).transpose(-1, -2)  # (B, H, T, T)
    if key_padding_mask is not None:
        weights = weights.masked_fill(key_padding_mask[:, None, None, :], 0.0)
    return (weights @ v) / (weights.sum(dim=-1, keepdim=True) + eps)


def naive_softmax_attention(q, k, v, key_padding_mask=None) -> torch.Tensor:
    """The reference for `softmax_attention`: softmax(q k^T / sqrt(D)) v written out, O(T^2)."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, H, T, T)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return scores.softmax(dim=-1) @ v
