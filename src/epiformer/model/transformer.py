"""The EPI Transformer: M7 (linear attention) and its softmax twin, identical otherwise.

Two inputs (`ModelConfig.input`):

- `elements`: enhancer [B, Le, 4] and promoter [B, Lp, 4] one-hot (float), optional bool
  masks [B, Le] / [B, Lp] that are True at *valid* bases (False = padding, for batches that
  mix widths). Each element is tokenised on its own with positions within the element and
  a learned segment embedding (enhancer, promoter); then both token sequences are joined
  so attention can relate enhancer to promoter.
- `span`: one sequence [B, L, 4] from the first element window to the second, everything
  between included (`epiformer.data.spans`), with each base's segment int64 [B, L] (enhancer 0,
  promoter 1, between 2; `constants.SEGMENT_IDS`) and a bool mask [B, L], True at real, non-N
  bases. Positions run along the whole span; a token takes the segment of its first base; a
  token with no valid base (padding, or an assembly gap) is masked out of attention and of
  the pool.

A model with `distance: true` also takes the pair's genomic distance [B] in bp (between
window centres for elements, the span length for spans; -1 across chromosomes). Output:
one logit per pair, [B].

Tokens are a linear projection of `kernel_size` bases taken every `patch_size` bases (a strided
convolution with no nonlinearity; 1/1 = one token per base), or with `stem: conv` the largest ReLU
response of `kernel_size`-wide filters within each patch (`conv_exp`: exp). Pre-norm blocks, final
LayerNorm, mean pooling over valid tokens only (with `pool: max`, each channel's largest value over
them; `softmax`, its values weighted by softmax(sharpness x value)), and a small head. M7 is the
linear stem and the mean; the other choices exist for spans, where a mean over thousands of tokens
drowns a few sites. With `element_pool: true` the head also reads each element's tokens pooled on
their own (the pooled whole, then the enhancer, then the promoter, joined), so it knows which
element holds which motif, which a pool over a span of background sequence blurs; with `element_patch_size`
a span model reads each element window also at fine tokens from filters of its own, joined to the span's
tokens without positions, and each element's pool reads those. A distance-aware
model joins `distance_features` (log distance, and whether the pair is across chromosomes) to the
pooled representation before the head: genomic distance is the strongest single predictor of
enhancer-promoter contact, and the sequence cannot tell it; a linear term of the same features is
added to the logit.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from epiformer.constants import ELEMENTS, SEGMENT_IDS
from epiformer.model.configs import DELTA_RULES, RECOMPUTE_TOKENS, TOWER_FIRST_POOL, ModelConfig
from epiformer.model.delta_rule import bidirectional_delta_rule
from epiformer.model.onehot_lookup import FilterLookup, looked_up_linear
from epiformer.model.ops import linear_attention, softmax_attention

ATTENTION = {"linear": linear_attention, "softmax": softmax_attention}


POSITION_BASE = 10000.0  # Vaswani et al.'s
# Bases a conv stem's matrix product covers at once when its patch is a multiple of it, by patch pool. A block's
# product multiplies (k + b - 1) / k as many weights as the filters hold (the rest are zeros), but its output, b
# responses a row, is what the next pass reads: at one thread, the softmax pool (in cache, `softmax_pooled_filters`)
# took 0.82x the time with blocks of 4 as of 8 at 128 bp, the max pool (whole tensors) 1.17x at 32 bp.
RESPONSE_BLOCK = {"max": 8, "softmax": 4}
SOFTMAX_POOL_SHARPNESS = 2.0  # patch_pool softmax: each filter's starting sharpness (Enformer's pooling starts at 2)
TOKEN_POOL_SHARPNESS = 2.0  # pool softmax: each channel's starting sharpness over a span's tokens


def position_base(dim: int, max_positions: int) -> float:
    """The sinusoids' base: 10,000, or larger where the longest wavelength must cover `max_positions` tokens.

    The lowest frequency's (sin, cos) pair goes once round the circle in 2 pi base^((dim - 2) / dim)
    tokens; within that no two positions share it, so the whole table tells them apart.
    """
    if dim <= 2 or max_positions <= 0:
        return POSITION_BASE
    return max(POSITION_BASE, (max_positions / (2 * math.pi)) ** (dim / (dim - 2)))


def sinusoidal_positions(length: int, dim: int, device=None, base: float = POSITION_BASE) -> torch.Tensor:
    """[T, D] sinusoidal position table (Vaswani et al. 2017), wavelengths up to 2 pi base^((D - 2) / D)."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(base) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


DISTANCE_FEATURES = 2
LOG10_DISTANCE_CENTRE = 5.0  # 100 kb, the middle of the enhancer-promoter distances of TargetFinder and BENGI


def distance_features(distance: torch.Tensor) -> torch.Tensor:
    """[B] bp (-1 across chromosomes) -> float [B, 2]: centred log10(distance + 1) (0 across), across flag."""
    across = distance < 0
    log_distance = torch.log10(distance.clamp(min=0).float() + 1) - LOG10_DISTANCE_CENTRE
    return torch.stack([log_distance.masked_fill(across, 0.0), across.float()], dim=-1)


class Tokenizer(nn.Module):
    """One-hot bases -> tokens, one every p bases.

    `stem: linear` (M7): a linear projection of the k bases around each patch (a strided
    convolution, no nonlinearity). `stem: conv`: k-wide filters at every base, ReLU, and each
    channel's largest value within the patch, as the stems of Basenji, Enformer and Borzoi do
    in their first layer: a site anywhere in the patch lights its channel whatever its offset,
    which a linear projection of the patch cannot do (docs/demo_long.md, "Finding the insulator").
    `stem: conv_tower`: coarse tokens (32, 128 bp) at a fraction of that cost: a quarter as many
    k-wide exp filters, each one's largest response over 8 bases, then `ConvTower`'s stages of
    convolution and pooling up to the patch (benchmarks/coarse_tokens.py measures the cost).
    The conv stems pool each filter by its largest response in the patch, or with `patch_pool:
    softmax` by a softmax-weighted sum of them (`softmax_pool`), which coarse tokens learn through.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.patch, self.kernel, self.stem = config.patch_size, config.kernel_size, config.stem
        self.activation = "relu" if self.stem == "conv" else "exp"  # of the conv stems and the tower's first stage
        stride = self.patch if self.stem == "linear" else 1
        # Bases a filter's largest response is taken over: the patch, or the tower's first stage.
        self.filter_pool = TOWER_FIRST_POOL if self.stem == "conv_tower" else self.patch
        # Bases whose responses one matrix product computes (`_responses`): the product's zeros grow with the
        # square of this, so a coarse patch is computed a few bases at a time (RESPONSE_BLOCK) and pooled as one.
        block = RESPONSE_BLOCK[config.patch_pool]
        self.block = block if self.filter_pool % block == 0 else self.filter_pool
        filters = tower_first_filters(config.d_model) if self.stem == "conv_tower" else config.d_model
        # The conv stem reads this layer's weights in `_block_filters` rather than calling it;
        # kept a Conv1d so that the weights, their initial values and saved models stay as they were.
        self.project = nn.Conv1d(4, filters, config.kernel_size, stride=stride)
        # patch_pool softmax: each filter's sharpness, softmax(sharpness x response) weighting its responses
        softmax = config.patch_pool == "softmax"
        self.sharpness = nn.Parameter(torch.full((filters,), SOFTMAX_POOL_SHARPNESS)) if softmax else None
        if self.stem == "conv_tower":
            self.tower = ConvTower(filters, config.d_model, self.patch // self.filter_pool)

    def forward(self, onehot: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, L, 4], bool [B, L] -> tokens [B, T, D], bool valid tokens [B, T], T = ceil(L / p)."""
        batch, length, _ = onehot.shape
        tail = -length % self.patch
        onehot = F.pad(onehot * valid[..., None], (0, 0, 0, tail))  # padding bases read as N
        valid = F.pad(valid, (0, tail))
        token_valid = valid.view(batch, -1, self.patch).any(dim=-1)  # (B, T)
        if self.stem == "linear":
            left = (self.kernel - self.patch) // 2
            x = F.pad(onehot.transpose(1, 2), (left, self.kernel - self.patch - left))  # (B, 4, L')
            return self.project(x).transpose(1, 2), token_valid  # (B, T, D)
        recompute = recomputing(batch * token_valid.shape[1] * self.patch // self.filter_pool)
        # The fused softmax pool keeps no per-base tensor for the backward pass: nothing to recompute.
        if recompute and not self.fuses_pooling(onehot):
            x = self.chunked_patch_max(onehot)
        else:
            x = self.patch_tokens(self.pad_for_filters(onehot))  # (B, L / filter_pool, filters)
        if self.stem == "conv_tower":
            first_valid = valid.view(batch, -1, self.filter_pool).any(dim=-1)  # (B, L / filter_pool)
            stages = (self.tower, x, first_valid)
            x = checkpoint(*stages, use_reentrant=False) if recompute else self.tower(x, first_valid)
        return x, token_valid  # (B, T, D)

    def chunked_patch_max(self, onehot: torch.Tensor) -> torch.Tensor:
        """The conv stem's tokens [B, T, D] (pooled as `pool_patches` does), RECOMPUTE_TOKENS at a time, each chunk
        recomputed in the backward pass.

        The per-base responses [B, T, p, D] of one chunk are alive at a time, not the span's.
        A chunk reads its neighbours' bases at its edges, as the whole would.
        """
        batch, length, _ = onehot.shape
        padded = self.pad_for_filters(onehot)
        chunk = max(1, RECOMPUTE_TOKENS // batch) * self.filter_pool  # bases a chunk's first-stage tokens cover
        tokens = [
            checkpoint(
                self.patch_tokens, padded[:, start : min(start + chunk, length) + self.kernel - 1], use_reentrant=False
            )
            for start in range(0, length, chunk)
        ]
        return torch.cat(tokens, dim=1)

    def patch_tokens(self, padded: torch.Tensor) -> torch.Tensor:
        """Tokens [B, t, D] (first-stage tokens for conv_tower) of bases already padded with the k - 1 bases their
        filters read beyond them: each filter's responses (`_responses`) pooled over each patch."""
        length = padded.shape[1] - self.kernel + 1
        if self.fuses_pooling(padded):
            windows, weight, bias = self._windows(padded, length), *self._block_filters()
            lookup = self._lookup(padded)
            pool = (self.sharpness, self.filter_pool, self.activation)
            return softmax_pooled_filters(windows, weight, bias, *pool, lookup=lookup)
        return self.pool_patches(self._responses(padded, length))

    def fuses_pooling(self, bases: torch.Tensor) -> bool:
        """Whether the filters and their softmax pooling run as one (`softmax_pooled_filters`): softmax-pooled,
        on the CPU. A GPU's memory keeps pace with the separate passes, and the fused chunks are too small for it."""
        return self.sharpness is not None and bases.device.type == "cpu"

    def pad_for_filters(self, onehot: torch.Tensor) -> torch.Tensor:
        """[B, L, 4] -> [B, L + k - 1, 4]: the bases each end's filters read beyond the sequence, as N."""
        left = (self.kernel - 1) // 2
        return F.pad(onehot, (0, 0, left, self.kernel - 1 - left))

    def pool_patches(self, responses: torch.Tensor) -> torch.Tensor:
        """[B, L / block, block, D] filter responses -> [B, L / filter_pool, D]: pooled over each patch, activated."""
        batch, _, _, channels = responses.shape
        responses = responses.reshape(batch, -1, self.filter_pool, channels)  # (B, L / filter_pool, filter_pool, D)
        if self.sharpness is not None:
            return softmax_pool(responses, self.sharpness, self.activation)
        return patch_max(responses, self.activation)

    def _responses(self, padded: torch.Tensor, length: int) -> torch.Tensor:
        """Each filter on the k bases centred on each of `length` bases (a multiple of the patch), given with the
        k - 1 bases around them: [B, length / b, b, D], b bases (`block`: the patch, or RESPONSE_BLOCK of a coarse
        one) at a time."""
        windows, weight, bias = self._windows(padded, length), *self._block_filters()
        lookup = self._lookup(padded)
        if lookup is None:
            responses = F.linear(windows, weight, bias)  # (B, L / b, b * D)
        else:
            responses = looked_up_linear(windows, weight, bias, lookup)
        return responses.view(padded.shape[0], -1, self.block, self.project.out_channels)

    def _lookup(self, padded: torch.Tensor) -> FilterLookup | None:
        """The filters' responses to these bases as table look-ups, on the CPU (where it is 4x faster than the
        product; a GPU multiplies at little cost, and the look-up's checks would wait on it), or None."""
        if not LOOKUP_RESPONSES or padded.device.type != "cpu":
            return None
        return FilterLookup.of(padded, self.project.weight, self.project.bias)

    def _windows(self, padded: torch.Tensor, length: int) -> torch.Tensor:
        """[B, length / b, (k + b - 1) * 4]: the bases each block of b filter positions reads (a view, no copy).

        The convolution is one matrix product, block by block: a block's b filter positions
        read its k + b - 1 bases, which are consecutive rows of the [B, L, 4] input, so each
        block's window is 4 (k + b - 1) contiguous floats and gathering the windows is a plain
        view. Tokens come out [B, T, D], contiguous, the layout every later layer reads;
        Conv1d's channels-first output left them transposed, and each later layer copied them
        back (docs/demo_long.md, "A faster stem", has what this saves).
        """
        width = self.kernel + self.block - 1  # bases a block's filters read
        x = padded.contiguous()
        return x.as_strided((x.shape[0], length // self.block, 4 * width), (x.stride(0), 4 * self.block, 1))

    def _block_filters(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The weight [b * D, (k + b - 1) * 4] and bias [b * D] that turn a block's window into its b responses."""
        return self.filters_at_each_offset(), self.project.bias.repeat(self.block)

    def filters_at_each_offset(self) -> torch.Tensor:
        """[b * D, (k + b - 1) * 4]: row block j holds the filters j bases into a block's window, zeros elsewhere."""
        filters = self.project.weight.transpose(1, 2).reshape(self.project.out_channels, -1)  # (D, k * 4), base-major
        block = filters.new_zeros(self.block, filters.shape[0], 4 * (self.kernel + self.block - 1))
        for offset in range(self.block):
            block[offset, :, 4 * offset : 4 * (offset + self.kernel)] = filters
        return block.flatten(0, 1)


def tower_first_filters(d_model: int) -> int:
    """Filters of conv_tower's first stage, which runs at every base: a quarter of d_model, 8 at least."""
    return max(8, d_model // 4)


TOWER_KERNEL = 5  # width of each later stage's convolution, in that stage's tokens


class ConvTower(nn.Module):
    """conv_tower's stages after its first: convolution, ReLU and max pooling by 4 (by 2 for the last, if need be)
    until `factor` times coarser, widening to d_model at the first. Enformer's and Borzoi's towers reach 128 bp
    a token this way; each stage runs on 4 times fewer tokens than the one before, so the first stage, at
    every base, sets the cost. Positions whose bases are all N or padding hold zeros before each stage, so a
    span scores the same alone as padded in a batch of longer spans (tested)."""

    def __init__(self, filters: int, d_model: int, factor: int):
        super().__init__()
        self.factors = []
        while factor > 1:
            self.factors.append(min(4, factor))
            factor //= self.factors[-1]
        self.factors = self.factors or [1]  # at 8 bp a token, one stage without pooling widens to d_model
        widths = [filters] + [d_model] * len(self.factors)
        self.convs = nn.ModuleList(
            nn.Conv1d(widths[i], widths[i + 1], TOWER_KERNEL, padding=TOWER_KERNEL // 2)
            for i in range(len(self.factors))
        )

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """[B, t, filters] first-stage tokens and their valid mask [B, t] -> [B, t / factor, d_model]."""
        x = x.transpose(1, 2)  # (B, C, t): the convolutions' layout
        for conv, factor in zip(self.convs, self.factors):
            x = conv(x * valid[:, None, :].to(x.dtype))  # (B, C, t)
            # ReLU, then the largest of each `factor` positions: patch_max's fast path (ReLU rises monotonically).
            x = patch_max(x.view(*x.shape[:2], -1, factor), "relu", dim=3)
            valid = valid.view(valid.shape[0], -1, factor).any(dim=-1)
        return x.transpose(1, 2).contiguous()


def softmax_pool(responses: torch.Tensor, sharpness: torch.Tensor, activation: str = "relu") -> torch.Tensor:
    """[B, T, p, D] -> [B, T, D]: each channel's responses within each patch weighted by softmax(sharpness x
    response) and summed (Enformer's attention pooling, with one sharpness per channel), through `activation`.

    At most the patch's largest response, and near it once the filter is sharp; unlike a max, every position
    gets gradient by its weight. A max over 32 bases gives a filter that faintly resembles a CTCF site
    gradient from a site only when the site is its patch's best match, and the long demo's insulator was
    found in 1 seed of 4 at 128 bp, against 3 of 4 with this pool (docs/demo_scale.md, "Coarse tokens that learn").
    """
    pooled = (patch_weights(responses, sharpness, dim=2) * responses).sum(dim=2)
    return torch.exp(pooled) if activation == "exp" else F.relu(pooled)


def patch_weights(responses: torch.Tensor, sharpness: torch.Tensor, dim: int) -> torch.Tensor:
    """softmax(sharpness x response) over a patch's positions (`dim`): the weights of the softmax pool."""
    return torch.softmax(responses * sharpness, dim=dim)


# Responses (bases x filters) one chunk of softmax_pooled_filters holds: 1 MB, 64 tokens at 128 bp and 32 filters.
# Chunks of 1 << 16 and 1 << 20 responses made the stem's step 1.2x as long on the reference machine: the first
# pays each chunk's small products, the second no longer stays in cache. The filters' gradient sums chunk by
# chunk, so a model trained at another chunk size differs in its last bits.
FUSED_POOL_RESPONSES = 1 << 18
# Responses (bases x filters) of a training step up to which softmax_pooled_filters keeps them and their softmax
# weights for the backward pass (2 x 256 MB), rather than computing them again there: a 1.9 Mb span at 32
# filters is 61 M. Kept, they are written once and read once: a span model's step takes 0.8x as long
# (benchmarks/coarse_tokens.py), with the same numbers bit for bit.
FUSED_POOL_KEPT = 1 << 26
# Whether the conv stems (`Tokenizer._lookup`: softmax_pooled_filters and the max-pooled `_responses`) look their
# responses up (`FilterLookup`) where the bases are one-hot and need no gradient, rather than multiplying the
# windows by the block filters: a switch for benchmarks/coarse_tokens.py and the tests.
LOOKUP_RESPONSES = True


def softmax_pooled_filters(
    windows, weight, bias, sharpness, patch: int, activation: str, lookup: FilterLookup | None = None
) -> torch.Tensor:
    """`softmax_pool` of the filter responses F.linear(windows, weight, bias) over patches of `patch` bases, computed
    a few patches at a time so that no per-base tensor is ever whole: [B, n, w] windows of blocks of b bases
    (`Tokenizer._windows`), weight [b * D, w], bias [b * D], sharpness [D] -> tokens [B, n * b / patch, D].

    Separately, the responses, the softmax's passes and their gradients each cross main memory at every base
    (16 M floats a step of 4,096 tokens at 128 bp with 32 filters): the CPU waited on memory for 70% of a
    span model's step. In chunks that stay in cache, each chunk's passes run while it is there. A training
    step keeps each chunk's responses and softmax weights for the backward pass (up to FUSED_POOL_KEPT
    responses; beyond, the backward pass computes them again, one small matrix product a chunk). Same values
    and gradients as the separate layers, and bit for bit kept or recomputed (tested). With `lookup` (the same
    filters as a `FilterLookup` of the bases the windows read) the responses are looked up, not multiplied:
    equal within rounding; the gradients still come from the windows and the block filters.
    """
    with torch.autocast(device_type=windows.device.type, enabled=False):  # in the inputs' dtype, as the pool's sums
        return _SoftmaxPooledFilters.apply(windows, weight, bias, sharpness, patch, activation, lookup)


class _SoftmaxPooledFilters(torch.autograd.Function):
    """softmax_pooled_filters. With w = softmax(s r) over a patch's responses r and pooled = sum(w r):
    d pooled / d r = w (1 + s (r - pooled)) and d pooled / d s = sum(w r (r - pooled)) = sum(w r^2) - pooled^2.
    The forward pass sums w r^2 beside w r, so that the backward pass reads each response twice (one addcmul and
    one product), not six times. Not twice differentiable."""

    @staticmethod
    def forward(ctx, windows, weight, bias, sharpness, patch, activation, lookup):
        batch, blocks, _ = windows.shape
        filters = sharpness.shape[0]
        pooled = windows.new_empty(batch, blocks * weight.shape[0] // (patch * filters), filters)  # (B, T, D)
        keep = any(ctx.needs_input_grad[:4]) and batch * blocks * weight.shape[0] <= FUSED_POOL_KEPT
        squares = torch.empty_like(pooled) if ctx.needs_input_grad[3] else None  # sum(w r^2), for the sharpness
        kept = []  # responses and weights of each chunk, in order, when kept
        for row, tokens, _, responses in _chunk_responses(windows, weight, bias, patch, filters, lookup):
            weights = patch_weights(responses, sharpness, dim=1)  # (t, p, D)
            weighted = weights * responses if keep else weights.mul_(responses)
            torch.sum(weighted, dim=1, out=pooled[row, tokens])
            if squares is not None:
                torch.sum(weighted.mul_(responses), dim=1, out=squares[row, tokens])
            if keep:
                kept += [responses, weights]
        out = torch.exp(pooled) if activation == "exp" else F.relu(pooled)
        ctx.save_for_backward(windows, weight, bias, sharpness, pooled, out, squares, *kept)
        ctx.patch, ctx.activation, ctx.lookup = patch, activation, None if keep else lookup
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        with torch.autocast(device_type=grad.device.type, enabled=False):
            windows, weight, bias, sharpness, pooled, out, squares, *kept = ctx.saved_tensors
            grad = grad * (out if ctx.activation == "exp" else (pooled > 0).to(grad.dtype))  # d loss / d pooled
            needs_windows, needs_weight, needs_bias, needs_sharpness = ctx.needs_input_grad[:4]
            grad_windows = torch.zeros_like(windows, memory_format=torch.contiguous_format) if needs_windows else None
            grad_weight = torch.zeros_like(weight) if needs_weight else None
            grad_bias = torch.zeros_like(bias) if needs_bias else None
            grad_sharpness = (grad * (squares - pooled.square())).sum(dim=(0, 1)) if needs_sharpness else None
            # d pooled / d r = w (1 + s (r - pooled)) = w (r a + c), a = s, c = 1 - s pooled; times the gradient
            scale, shift = grad * sharpness, grad * (1 - sharpness * pooled)  # (B, T, D)
            chunks = _chunk_passes(windows, weight, bias, sharpness, ctx.patch, kept, ctx.lookup)
            for row, tokens, blocks, responses, weights in chunks:
                grad_responses = torch.addcmul(shift[row, tokens, None], responses, scale[row, tokens, None])
                grad_responses = grad_responses.mul_(weights).view(-1, weight.shape[0])  # (t p / b, b D): a row a block
                if needs_weight:
                    grad_weight.addmm_(grad_responses.t(), windows[row, blocks])
                if needs_bias:
                    grad_bias += grad_responses.sum(dim=0)
                if needs_windows:
                    grad_windows[row, blocks] = grad_responses @ weight
            return grad_windows, grad_weight, grad_bias, grad_sharpness, None, None, None


def _chunk_passes(windows, weight, bias, sharpness, patch: int, kept: list, lookup: FilterLookup | None):
    """The backward pass's chunks: (batch row, tokens, blocks, responses, softmax weights), `kept` by the forward
    pass (each chunk's responses then weights) or, without them, computed again as it computed them."""
    if kept:
        chunks = _chunks(windows, weight, patch, sharpness.shape[0])
        for (row, tokens, blocks), responses, weights in zip(chunks, kept[::2], kept[1::2], strict=True):
            yield row, tokens, blocks, responses, weights
        return
    for row, tokens, blocks, responses in _chunk_responses(windows, weight, bias, patch, sharpness.shape[0], lookup):
        yield row, tokens, blocks, responses, patch_weights(responses, sharpness, dim=1)


def _chunks(windows, weight, patch: int, filters: int):
    """(batch row, its tokens, their blocks) as slices, a few tokens at a time: FUSED_POOL_RESPONSES responses a
    chunk."""
    batch, blocks, _ = windows.shape
    blocks_per_token = patch * filters // weight.shape[0]
    tokens = blocks // blocks_per_token
    step = max(1, FUSED_POOL_RESPONSES // (patch * filters))
    for row in range(batch):
        for start in range(0, tokens, step):
            stop = min(start + step, tokens)
            yield row, slice(start, stop), slice(start * blocks_per_token, stop * blocks_per_token)


def _chunk_responses(windows, weight, bias, patch: int, filters: int, lookup: FilterLookup | None = None):
    """(batch row, its tokens, their blocks, responses [t, patch, D]) of each chunk (`_chunks`): the block filters'
    product with the windows, or looked up (`lookup`)."""
    block = weight.shape[0] // filters
    for row, tokens, blocks in _chunks(windows, weight, patch, filters):
        if lookup is None:
            responses = F.linear(windows[row, blocks], weight, bias)  # (t p / b, b D)
        else:
            responses = lookup.responses(row, blocks.start * block, blocks.stop * block)  # (t p, D)
        yield row, tokens, blocks, responses.view(tokens.stop - tokens.start, patch, filters)


def patch_max(responses: torch.Tensor, activation: str = "relu", dim: int = 2) -> torch.Tensor:
    """[B, T, p, D] -> [B, T, D]: each channel's largest response within each patch (along `dim`), through
    `activation`.

    `relu`, or `exp`: the exponential activation of Koo and Ploenzke (2021), which makes
    first-layer filters learn whole motifs rather than parts of them. On the long demo it found
    the insulator in seeds where ReLU did not (docs/demo_long.md, "The exponential stem").
    """
    return _PatchMax.apply(responses, activation, dim)


class _PatchMax(torch.autograd.Function):
    """activation(amax over the patch), with a 0/1 mask of each patch's largest responses kept for the gradient.

    The same values as the activation then max pooling (both activations rise monotonically,
    so they commute with the max), at a fraction of the cost of F.max_pool1d with its
    indices, or of amax's own backward, on the CPU. The gradient goes to the largest response
    of each patch, shared equally among ties (amax's rule; MaxPool1d gives it all to the
    first), times the activation's slope there (ReLU's: none at or below 0). Identical windows
    tie, as in a run of one base, so the filters' gradient is MaxPool1d's and the bases'
    (attributions) is spread over the tied windows. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, responses, activation, dim):
        largest = responses.amax(dim=dim)  # (B, T, D)
        out = torch.exp(largest) if activation == "exp" else largest.clamp(min=0.0)
        if ctx.needs_input_grad[0]:  # not when scoring: no mask, no memory for it
            # 1.0 where a response is its patch's maximum, in the responses' dtype: sums and
            # products of a bool mask would convert it on every use.
            winners = torch.eq(responses, largest.unsqueeze(dim)).to(responses.dtype)  # (B, T, p, D)
            slope = out if activation == "exp" else largest > 0  # d activation / d largest
            ctx.save_for_backward(winners, slope)
            ctx.dim = dim
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        winners, slope = ctx.saved_tensors
        share = (grad * slope) / winners.sum(dim=ctx.dim).clamp_(min=1)  # (B, T, D); a NaN patch has no winner
        return winners * share.unsqueeze(ctx.dim), None, None


class Attention(nn.Module):
    """Multi-head self-attention [B, T, D] -> [B, T, D]: the QKV and output projections around the
    attention op the config names (`model.ops`: M7's linear attention, or softmax)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.attend = ATTENTION.get(config.attention)
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        # q, k, v: (B, H, T, D/H)
        y = self.attend(q, k, v, key_padding_mask=padding)  # (B, H, T, D/H)
        return self.out(y.transpose(1, 2).reshape(batch, length, dim))


HALF_LIVES = (8.0, 4096.0)  # tokens: the gated delta rule's heads start with decays spread between these


class DeltaAttention(Attention):
    """Attention by the delta rule (`deltanet`) or the gated delta rule (`gated_deltanet`), scanned both ways.

    Beside the QKV and output projections, each head gets its writing strength beta =
    sigmoid(a linear map of the token) (fla's DeltaNet) and, gated, its decay =
    exp(-softplus(another)), whose rate -log(decay) moves by a factor, not by an amount,
    whatever its size (as Mamba's and Gated DeltaNet's gates are made). The decay's bias
    starts each head at its own half-life, spread geometrically over HALF_LIVES, so that some
    heads start with a short memory and some with a long one (as RetNet's heads do).
    `model.delta_rule.bidirectional_delta_rule` is the op.
    """

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.attend = None  # the op takes beta and decay: `forward` calls it
        self.beta = nn.Linear(config.d_model, config.n_heads)
        self.decay = nn.Linear(config.d_model, config.n_heads) if config.attention == "gated_deltanet" else None
        if self.decay is not None:
            half_lives = torch.logspace(*(math.log10(h) for h in HALF_LIVES), config.n_heads)
            rate = math.log(2.0) / half_lives  # -log(decay) per token: half is left after a half-life
            with torch.no_grad():
                self.decay.weight.mul_(0.1)  # the token moves the rate around its head's start, a little at first
                self.decay.bias.copy_(torch.log(torch.expm1(rate)))  # softplus(bias) = rate

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        beta = torch.sigmoid(self.beta(x)).transpose(1, 2)  # (B, H, T)
        decay = None if self.decay is None else torch.exp(-F.softplus(self.decay(x))).transpose(1, 2)
        y = bidirectional_delta_rule(q, k, v, beta, decay, key_padding_mask=padding)  # (B, H, T, D/H)
        return self.out(y.transpose(1, 2).reshape(batch, length, dim))


def attention_layer(config: ModelConfig) -> nn.Module:
    """The attention layer the config names: M7's or softmax's (`Attention`), or a delta rule's."""
    return DeltaAttention(config) if config.attention in DELTA_RULES else Attention(config)


class Block(nn.Module):
    """Pre-norm: x + attn(LN(x)), then x + ffn(LN(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.attention = attention_layer(config)
        self.feed_forward = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model)
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None, recompute: bool = False) -> torch.Tensor:
        """With `recompute`, each half keeps only its input and is recomputed in the backward pass, one
        half at a time: the peak is the larger half's activations, not the block's (RECOMPUTE_TOKENS)."""
        if recompute:
            x = x + checkpoint(self._attend, x, padding, use_reentrant=False)
            return x + checkpoint(self._feed_forward, x, use_reentrant=False)
        x = x + self._attend(x, padding)
        return x + self._feed_forward(x)

    def start_as_identity(self) -> None:
        """Zero the output projections of attention and feed-forward: x passes the block unchanged until they learn."""
        for layer in (self.attention.out, self.feed_forward[-1]):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def _attend(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
        return self.dropout(self.attention(self.norm1(x), padding))

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.feed_forward(self.norm2(x)))


class EPITransformer(nn.Module):
    """The enhancer-promoter Transformer (module docstring): with `attention: linear` it is M7 (the
    config's `linear` model), with `attention: softmax` its twin; one logit per pair."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.tokenizer = Tokenizer(config)
        # Element models keep two segments, so their saved weights load as before.
        self.segment = nn.Embedding(3 if config.reads_spans else 2, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        if config.zero_init:
            for block in self.blocks:
                block.start_as_identity()
        self.norm = nn.LayerNorm(config.d_model)
        if config.pool == "softmax":
            self.pool_sharpness = nn.Parameter(torch.full((config.d_model,), TOKEN_POOL_SHARPNESS))
        pooled_width = config.d_model * (3 if config.element_pool else 1)  # the whole, and each element
        head_in = pooled_width + (DISTANCE_FEATURES if config.distance else 0)
        self.head = nn.Sequential(nn.Linear(head_in, config.d_model), nn.GELU(), nn.Linear(config.d_model, 1))
        # A direct linear path from distance to the logit, as in the distance baseline: the
        # monotone effect is learned at once, the head learns how sequence modifies it.
        self.distance_logit = nn.Linear(DISTANCE_FEATURES, 1) if config.distance else None
        # A span's elements at fine tokens from filters of their own: the elements' motifs and the
        # between-sequence's borders ask for different resolutions (docs/demo_scale.md). Made last, so
        # that the rest of the model starts from the weights it has without them.
        self.element_tokenizer = Tokenizer(config.element_stem()) if config.element_patch_size else None

    def embed(self, onehot: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens with positions along the sequence (no segment yet) [B, T, D], and valid tokens [B, T]."""
        tokens, token_valid = self.tokenizer(onehot, valid)  # (B, T, D), (B, T)
        # Scaled by sqrt(D) as in Vaswani et al.: unscaled, sequence content is small beside
        # the unit-amplitude positions, and training sat at chance for hundreds of steps.
        tokens = tokens * math.sqrt(tokens.shape[-1])
        if self.config.positions == "none":
            return tokens, token_valid
        base = position_base(tokens.shape[2], self.config.max_positions)
        return tokens + sinusoidal_positions(tokens.shape[1], tokens.shape[2], tokens.device, base), token_valid

    def forward(
        self,
        enhancer=None,
        promoter=None,
        enhancer_valid=None,
        promoter_valid=None,
        distance=None,
        span=None,
        segment=None,
        span_valid=None,
    ) -> torch.Tensor:
        """Logits [B] from the two elements, or from a span (`span`, `segment`, `span_valid`): module docstring."""
        fine = None  # span models with element_patch_size: which tokens are the elements' own
        if self.config.reads_spans:
            x, valid, padding, token_segment, fine = self.span_tokens(span, segment, span_valid)
        else:
            x, valid, padding, token_segment = self.join_elements(enhancer, promoter, enhancer_valid, promoter_valid)
        recompute = recomputing(x.shape[0] * x.shape[1])
        for block in self.blocks:
            x = block(x, padding, recompute)
        x = self.norm(x)
        pooled = self.pool(x, valid & ~fine if fine is not None else valid)  # (B, D)
        if self.config.element_pool:  # (B, 3D): the whole, the enhancer's tokens, the promoter's
            elements = [self.pool(x, valid & self.element_tokens(token_segment, fine, name)) for name in ELEMENTS]
            pooled = torch.cat([pooled, *elements], dim=-1)
        if self.config.distance:
            if distance is None:
                raise ValueError("this model was built with distance: true and needs each pair's distance")
            features = distance_features(distance).to(pooled.dtype)  # (B, 2)
            joined = torch.cat([pooled, features], dim=-1)  # (B, D + 2)
            return (self.head(joined) + self.distance_logit(features)).squeeze(-1)
        return self.head(pooled).squeeze(-1)

    def pool(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """[B, T, D] -> [B, D]: the mean over valid tokens (`pool`: max, each channel's largest value; softmax, its
        values weighted by softmax(sharpness x value)); zeros where a row has no valid token."""
        empty = ~valid.any(dim=1, keepdim=True)  # (B, 1)
        if self.config.pool == "max":
            pooled = x.masked_fill(~valid[..., None], float("-inf")).amax(dim=1)
            return pooled.masked_fill(empty, 0.0)  # no valid token: zeros, not -inf
        if self.config.pool == "softmax":
            # An empty row's scores stay finite (all invalid, uniform) so that no NaN reaches the gradient.
            scores = (x * self.pool_sharpness).masked_fill(~valid[..., None] & ~empty[..., None], float("-inf"))
            return (torch.softmax(scores, dim=1) * x).sum(dim=1).masked_fill(empty, 0.0)
        weights = valid[..., None].to(x.dtype)
        return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)

    def span_tokens(self, span, segment, span_valid):
        """A span's tokens [B, T, D] (segments embedded), valid tokens [B, T], the padding mask, segments [B, T],
        and which tokens are the elements' own (element_patch_size; None without)."""
        if span is None or segment is None or span_valid is None:
            raise ValueError("this model reads spans (input: span) and needs span, segment and span_valid")
        x, valid = self.embed(span, span_valid)
        token_segment = segment[:, :: self.tokenizer.patch]  # (B, T): a token's segment is its first base's
        fine = None
        if self.element_tokenizer is not None:
            x, valid, token_segment, fine = self.with_fine_elements(x, valid, token_segment, span, segment, span_valid)
        # As a product with the one-hot segments, not an embedding lookup: with three rows and
        # thousands of tokens, the lookup's backward (a scatter into three rows) is the slower.
        x = x + F.one_hot(token_segment, self.segment.num_embeddings).to(x.dtype) @ self.segment.weight
        return x, valid, ~valid, token_segment, fine  # spans of one batch differ in length and may hold gaps

    def with_fine_elements(self, x, valid, token_segment, span, segment, span_valid):
        """The span's tokens [B, T, D] with each element's own tokens, at element_patch_size bases and without
        positions, appended: [B, T + Te + Tp, D], valid tokens, segments, and which tokens are the appended."""
        parts, valids, segments = [x], [valid], [token_segment]
        for name in ELEMENTS:
            bases, bases_valid = element_bases(span, segment, span_valid, SEGMENT_IDS[name])
            tokens, tokens_valid = self.element_tokenizer(bases, bases_valid)
            parts.append(tokens * math.sqrt(tokens.shape[-1]))  # scaled as `embed` scales the span's
            valids.append(tokens_valid)
            segments.append(torch.full_like(tokens_valid, SEGMENT_IDS[name], dtype=torch.long))
        fine = torch.cat([torch.zeros_like(valid), *(torch.ones_like(v) for v in valids[1:])], dim=1)
        return torch.cat(parts, dim=1), torch.cat(valids, dim=1), torch.cat(segments, dim=1), fine

    @staticmethod
    def element_tokens(token_segment, fine, name: str) -> torch.Tensor:
        """[B, T] the tokens an element's pool reads: its segment's (with fine element tokens, only those)."""
        mine = token_segment == SEGMENT_IDS[name]
        return mine if fine is None else mine & fine

    def join_elements(self, enhancer, promoter, enhancer_valid, promoter_valid):
        """Both elements' tokens joined [B, T, D], valid tokens [B, T], the padding mask (or None), segments [B, T]."""
        # Without masks every token is valid: attention then skips masking (and SDPA can use
        # its fastest kernels). Decided from the arguments, not the data, so compiled graphs stay whole.
        masked = enhancer_valid is not None or promoter_valid is not None
        if enhancer_valid is None:
            enhancer_valid = torch.ones(enhancer.shape[:2], dtype=torch.bool, device=enhancer.device)
        if promoter_valid is None:
            promoter_valid = torch.ones(promoter.shape[:2], dtype=torch.bool, device=promoter.device)
        e_tokens, e_valid = self.embed(enhancer, enhancer_valid)
        p_tokens, p_valid = self.embed(promoter, promoter_valid)
        enhancer_row, promoter_row = (self.segment.weight[SEGMENT_IDS[name]] for name in ELEMENTS)
        x = torch.cat([e_tokens + enhancer_row, p_tokens + promoter_row], dim=1)  # (B, Te + Tp, D)
        valid = torch.cat([e_valid, p_valid], dim=1)  # (B, Te + Tp)
        token_segment = torch.cat(
            [
                torch.full_like(e_valid, SEGMENT_IDS["enhancer"], dtype=torch.long),
                torch.full_like(p_valid, SEGMENT_IDS["promoter"], dtype=torch.long),
            ],
            dim=1,
        )
        return x, valid, ~valid if masked else None, token_segment


def element_bases(span, segment, span_valid, segment_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One element's bases [B, W, 4] and their valid mask [B, W] cut from each span: the run of `segment_id`
    bases from its first, W the longest in the batch (shorter rows padded, invalid). An element is one run
    (data.spans); a base of another segment inside the cut is invalid, so nothing else is read as the element."""
    inside = segment == segment_id  # (B, L)
    counts = inside.sum(dim=1)  # (B,)
    starts = inside.to(torch.uint8).argmax(dim=1)  # (B,): the first base of the run (0 when a row has none)
    width = max(int(counts.max()), 1)
    offsets = torch.arange(width, device=span.device)
    index = (starts[:, None] + offsets).clamp_(max=span.shape[1] - 1)  # (B, W)
    cut_valid = torch.gather(span_valid & inside, 1, index) & (offsets < counts[:, None])
    bases = torch.gather(span, 1, index[..., None].expand(-1, -1, span.shape[2]))
    return bases * cut_valid[..., None].to(bases.dtype), cut_valid


def recomputing(tokens: int) -> bool:
    """Whether a batch of `tokens` (batch x tokens) recomputes activations in the backward pass (RECOMPUTE_TOKENS).

    Whenever gradients are taken, not only in training: attributions of a long span take them too.
    """
    return torch.is_grad_enabled() and tokens > RECOMPUTE_TOKENS


def score_batch(model: nn.Module, config: ModelConfig, batch: dict, device: torch.device) -> torch.Tensor:
    """Logits [B] of a batch of `model` (of `config`, whatever wraps it: DDP, compile, an ensemble): a
    `batches.PairBatches` batch or, for a model that reads spans, a `batches.SpanBatches` one."""
    distance = batch["distance"].to(device)
    if config.reads_spans:
        return model(
            span=batch["span"].to(device),
            segment=batch["segment"].to(device),
            span_valid=batch["span_valid"].to(device),
            distance=distance,
        )
    return model(batch["enhancer"].to(device), batch["promoter"].to(device), distance=distance)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters of a model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
