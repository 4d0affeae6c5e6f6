"""A conv stem's filter responses on one-hot DNA by table look-up instead of a matrix product.

A filter's response at a base is the sum, over the k bases it reads, of its weight for the base
present there: one of four columns, or none for an N. So the filters' responses to every
possible run of LOOKUP_BASES bases (5 ** 4 = 625 of them with N) can be tabulated once a step,
and a response is then ceil(k / 4) table rows summed: 5 rows of 32 floats for 19-wide filters,
where the product multiplies 88 window values by 128 block weights (4 bases a block, the
zeros included). On one CPU thread that computed a chunk of 8,192 bases' responses 4.4x faster
(F.embedding_bag with offsets; a 2-D index without offsets was half that); `benchmarks/coarse_tokens.py`
measures it in a training step. It computes the same sums in another order: equal to the
product's within float rounding (tested), not bit for bit.

Only for inputs that are exactly one-hot (0/1, at most one 1 a base) and need no gradient
(`FilterLookup.of` returns None otherwise): attributions differentiate with respect to the
bases, and the matrix product serves them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOOKUP_BASES = 4  # bases a table row covers: 5 ** 4 rows a part (A, C, G, T or N at each), 80 KB at 32 filters
SYMBOLS = 5  # A, C, G, T and N (a base whose one-hot row is all zeros)


class FilterLookup:
    """The responses of filters `weight` [D, 4, k] (Conv1d's layout) plus `bias` [D] at each filter position of
    `padded` [B, n + k - 1, 4], the k - 1 bases around the n positions included: `responses(row, start, stop)`."""

    def __init__(self, codes: torch.Tensor, table: torch.Tensor, parts: int):
        self.codes, self.table, self.parts = codes, table, parts  # [B, n * parts] int32, [parts * 625, D]
        self.offsets = torch.arange(0, codes.numel(), parts, dtype=torch.int32, device=codes.device)

    @classmethod
    def of(cls, padded: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> FilterLookup | None:
        """The look-up for these bases and filters, or None where it would not give the product's values and
        gradients: bases that need a gradient, or are not exactly one-hot."""
        if padded.requires_grad:
            return None
        symbols = base_symbols(padded)
        if symbols is None:
            return None
        parts = -(-weight.shape[2] // LOOKUP_BASES)
        with torch.no_grad():
            return cls(part_codes(symbols, weight.shape[2], parts), response_table(weight, bias, parts), parts)

    def responses(self, row: int, start: int, stop: int) -> torch.Tensor:
        """[stop - start, D]: the filters' responses at positions start..stop of batch row `row`."""
        codes = self.codes[row, start * self.parts : stop * self.parts]
        return F.embedding_bag(codes, self.table, self.offsets[: stop - start], mode="sum")

    def all_responses(self) -> torch.Tensor:
        """[B, n, D]: the filters' responses at every position of every row."""
        responses = F.embedding_bag(self.codes.flatten(), self.table, self.offsets, mode="sum")
        return responses.view(self.codes.shape[0], -1, self.table.shape[1])


def looked_up_linear(windows, weight, bias, lookup: FilterLookup) -> torch.Tensor:
    """F.linear(windows, weight, bias) for a conv stem's block windows [B, n, w] and block filters [b D, w], [b D]
    (`transformer.Tokenizer._windows`): the values from `lookup` of the same bases and filters ([B, n, b D]),
    within rounding; the gradients F.linear's, for the windows, weight and bias."""
    return _LookedUpLinear.apply(windows, weight, bias, lookup)


class _LookedUpLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, windows, weight, bias, lookup):
        ctx.save_for_backward(windows, weight)
        return lookup.all_responses().view(windows.shape[0], windows.shape[1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        windows, weight = ctx.saved_tensors
        needs_windows, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        grad_windows = grad @ weight if needs_windows else None
        grad_weight = grad.flatten(0, 1).t() @ windows.flatten(0, 1) if needs_weight else None
        grad_bias = grad.sum(dim=(0, 1)) if needs_bias else None
        return grad_windows, grad_weight, grad_bias, None


def base_symbols(onehot: torch.Tensor) -> torch.Tensor | None:
    """[B, L, 4] one-hot -> [B, L] int32 symbols (0-3 the base, 4 for N, an all-zero row); None if not one-hot."""
    if not torch.equal(onehot, onehot.round().clamp_(0, 1)):
        return None
    a, c, g, t = onehot.unbind(dim=-1)
    present = a + c + g + t
    if present.max() > 1:
        return None
    symbol = torch.add(c, g, alpha=2).add_(t, alpha=3).add_(present, alpha=-(SYMBOLS - 1)).add_(SYMBOLS - 1)
    return symbol.to(torch.int32)


def part_codes(symbols: torch.Tensor, kernel: int, parts: int) -> torch.Tensor:
    """[B, n + k - 1] symbols -> [B, n * parts] int32: for each filter position, the table row of each run of
    LOOKUP_BASES bases its filters read (the last run padded with N beyond the k-th base)."""
    positions = symbols.shape[1] - kernel + 1
    symbols = F.pad(symbols, (0, parts * LOOKUP_BASES - kernel), value=SYMBOLS - 1)
    runs = symbols.shape[1] - LOOKUP_BASES + 1
    code = symbols[:, :runs].clone()
    for offset in range(1, LOOKUP_BASES):  # base-5 digits, the run's first base lowest
        code += symbols[:, offset : offset + runs] * SYMBOLS**offset
    code = code.contiguous()
    rows = code.as_strided((code.shape[0], positions, parts), (code.stride(0), 1, LOOKUP_BASES))
    part_start = torch.arange(parts, dtype=torch.int32, device=code.device) * SYMBOLS**LOOKUP_BASES
    return (rows + part_start).flatten(1)


def response_table(weight: torch.Tensor, bias: torch.Tensor, parts: int) -> torch.Tensor:
    """[parts * 625, D]: row (part p, run r) holds the filters' summed weights for run r at bases 4p..4p + 3 of
    their k (bias added in part 0's rows)."""
    filters, _, kernel = weight.shape
    weight = F.pad(weight, (0, parts * LOOKUP_BASES - kernel))  # (D, 4, parts * 4): zeros beyond the k-th base
    runs = torch.arange(SYMBOLS**LOOKUP_BASES, device=weight.device)
    digits = torch.stack([runs // SYMBOLS**i % SYMBOLS for i in range(LOOKUP_BASES)], dim=1)  # (625, 4)
    onehot = F.one_hot(digits, SYMBOLS)[..., :4].to(weight.dtype)  # (625, 4 bases, 4): N reads nothing
    table = torch.einsum("rjc,dcpj->prd", onehot, weight.view(filters, 4, parts, LOOKUP_BASES))
    table[0] += bias
    return table.reshape(parts * SYMBOLS**LOOKUP_BASES, filters).contiguous()
