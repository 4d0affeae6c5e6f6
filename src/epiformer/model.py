"""The EPI Transformer: M7 (linear attention) and its softmax twin, identical otherwise.

Input: enhancer [B, Le, 4] and promoter [B, Lp, 4] one-hot (float), optional bool masks
[B, Le] / [B, Lp] that are True at *valid* bases (False = padding, for batches that mix
widths). Output: one logit per pair, [B].

Each element is cut into tokens by a linear projection of `kernel_size` bases taken every
`patch_size` bases (a strided convolution with no nonlinearity; 1/1 = one token per base),
given sinusoidal positions within the element and a learned segment embedding, then both
token sequences are joined so attention can relate enhancer to promoter. Pre-norm blocks,
final LayerNorm, mean pooling over valid tokens only, and a small head.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from epiformer.ops import linear_attention, softmax_attention

ATTENTION = {"linear": linear_attention, "softmax": softmax_attention}


@dataclass
class ModelConfig:
    """Defaults: the model config/README.md recommends for real data (3 kb + 2 kb windows)."""

    attention: str = "linear"  # "linear" (M7, ELU+1 kernel) or "softmax" (the baseline)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 8
    d_ff: int = 512  # 4 x d_model, as in Vaswani et al.
    patch_size: int = 10
    kernel_size: int = 20
    dropout: float = 0.1

    def __post_init__(self):
        if self.attention not in ("linear", "softmax"):
            raise ValueError(f"attention must be 'linear' or 'softmax', not {self.attention!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.kernel_size < self.patch_size:
            raise ValueError(f"kernel_size ({self.kernel_size}) must be >= patch_size ({self.patch_size})")

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """[T, D] sinusoidal position table (Vaswani et al. 2017)."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


class Tokenizer(nn.Module):
    """One-hot bases -> tokens: a linear projection of k-mers every p bases."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.patch, self.kernel = config.patch_size, config.kernel_size
        self.project = nn.Conv1d(4, config.d_model, config.kernel_size, stride=config.patch_size)

    def forward(self, onehot: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, L, 4], bool [B, L] -> tokens [B, T, D], bool valid tokens [B, T], T = ceil(L / p)."""
        batch, length, _ = onehot.shape
        tail = -length % self.patch
        onehot = F.pad(onehot * valid[..., None], (0, 0, 0, tail))  # padding bases read as N
        valid = F.pad(valid, (0, tail))
        left = (self.kernel - self.patch) // 2
        x = F.pad(onehot.transpose(1, 2), (left, self.kernel - self.patch - left))  # (B, 4, L')
        tokens = self.project(x).transpose(1, 2)  # (B, T, D)
        token_valid = valid.view(batch, -1, self.patch).any(dim=-1)  # (B, T)
        return tokens, token_valid


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.attend = ATTENTION[config.attention]
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        # q, k, v: (B, H, T, D/H)
        y = self.attend(q, k, v, key_padding_mask=padding)  # (B, H, T, D/H)
        return self.out(y.transpose(1, 2).reshape(batch, length, dim))


class Block(nn.Module):
    """Pre-norm: x + attn(LN(x)), then x + ffn(LN(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.attention = Attention(config)
        self.feed_forward = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model)
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.norm1(x), padding))
        return x + self.dropout(self.feed_forward(self.norm2(x)))


class EPITransformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tokenizer = Tokenizer(config)
        self.segment = nn.Embedding(2, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Sequential(nn.Linear(config.d_model, config.d_model), nn.GELU(), nn.Linear(config.d_model, 1))

    def embed(self, onehot: torch.Tensor, valid: torch.Tensor, segment: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, token_valid = self.tokenizer(onehot, valid)  # (B, T, D), (B, T)
        # Scaled by sqrt(D) as in Vaswani et al.: unscaled, sequence content is small beside
        # the unit-amplitude positions, and training sat at chance for hundreds of steps.
        tokens = tokens * math.sqrt(tokens.shape[-1])
        positions = sinusoidal_positions(tokens.shape[1], tokens.shape[2], tokens.device)
        return tokens + positions + self.segment.weight[segment], token_valid

    def forward(self, enhancer, promoter, enhancer_valid=None, promoter_valid=None) -> torch.Tensor:
        # Without masks every token is valid: attention then skips masking (and SDPA can use
        # its fastest kernels). Decided from the arguments, not the data, so compiled graphs stay whole.
        masked = enhancer_valid is not None or promoter_valid is not None
        if enhancer_valid is None:
            enhancer_valid = torch.ones(enhancer.shape[:2], dtype=torch.bool, device=enhancer.device)
        if promoter_valid is None:
            promoter_valid = torch.ones(promoter.shape[:2], dtype=torch.bool, device=promoter.device)
        e_tokens, e_valid = self.embed(enhancer, enhancer_valid, 0)
        p_tokens, p_valid = self.embed(promoter, promoter_valid, 1)
        x = torch.cat([e_tokens, p_tokens], dim=1)  # (B, Te + Tp, D)
        valid = torch.cat([e_valid, p_valid], dim=1)  # (B, Te + Tp)
        padding = ~valid if masked else None
        for block in self.blocks:
            x = block(x, padding)
        x = self.norm(x)
        weights = valid[..., None].to(x.dtype)
        pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)  # (B, D)
        return self.head(pooled).squeeze(-1)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
