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


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None = None, eps: float = 1e-6
) -> torch.Tensor:
    """phi(q) (phi(k)^T v) / (phi(q) (phi(k)^T 1) + eps) with phi = elu + 1.

    O(T * D^2) time and O(T * D + D^2) memory: the [D, D] key-value summary is formed
    first, so no T x T tensor ever exists. A column of ones appended to v makes the same two
    matrix products yield the normaliser phi(q) (phi(k)^T 1) as their last column, saving
    two passes over the sequence. Computed in (at least) float32 even under autocast: the
    normaliser is a sum over all T keys and loses precision in bf16.
    """
    dtype = q.dtype
    compute = torch.promote_types(dtype, torch.float32)  # bf16/fp16 -> fp32; fp64 stays fp64
    with torch.autocast(device_type=q.device.type, enabled=False):
        phi_q, phi_k = elu_feature_map(q.to(compute)), elu_feature_map(k.to(compute))
        if key_padding_mask is not None:
            phi_k = phi_k.masked_fill(key_padding_mask[:, None, :, None], 0.0)
        v_ones = F.pad(v.to(compute), (0, 1), value=1.0)  # (B, H, T, D + 1)
        kv = phi_k.transpose(-1, -2) @ v_ones  # (B, H, D, D + 1): last column is phi(k)^T 1
        out = phi_q @ kv  # (B, H, T, D + 1): last column is the normaliser
        out = out[..., :-1] / (out[..., -1:] + eps)
    return out.to(dtype)


def softmax_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Standard scaled dot-product attention with the same mask semantics."""
    attn_mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]  # (B, 1, 1, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def naive_linear_attention(q, k, v, key_padding_mask=None, eps: float = 1e-6) -> torch.Tensor:
    weights = elu_feature_map(q) @ elu_feature_map(k).transpose(-1, -2)  # (B, H, T, T)
    if key_padding_mask is not None:
        weights = weights.masked_fill(key_padding_mask[:, None, None, :], 0.0)
    return (weights @ v) / (weights.sum(dim=-1, keepdim=True) + eps)


def naive_softmax_attention(q, k, v, key_padding_mask=None) -> torch.Tensor:
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, H, T, T)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return scores.softmax(dim=-1) @ v
