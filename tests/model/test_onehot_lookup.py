import pytest
import torch
import torch.nn.functional as F

import epiformer.model.transformer as transformer
from epiformer.model.configs import ModelConfig
from epiformer.model.onehot_lookup import FilterLookup, base_symbols
from epiformer.model.transformer import EPITransformer


def bases_with_n(batch: int, length: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    """One-hot [B, L, 4] with about one base in five an N (all zeros)."""
    generator = torch.Generator().manual_seed(seed)
    symbols = torch.randint(0, 5, (batch, length), generator=generator)
    return F.one_hot(symbols, 5)[..., :4].to(dtype)


@pytest.mark.parametrize("kernel", [1, 3, 4, 5, 8, 19, 20])
def test_looked_up_responses_are_the_convolution_of_the_bases(kernel):
    """Every filter position of every row, N bases included, kernels shorter than a table run, a multiple of it
    and one base past it: the same values as Conv1d on the one-hot bases (float64)."""
    generator = torch.Generator().manual_seed(kernel)
    weight = torch.randn(6, 4, kernel, dtype=torch.float64, generator=generator)
    bias = torch.randn(6, dtype=torch.float64, generator=generator)
    padded = bases_with_n(2, 50 + kernel - 1, kernel)
    lookup = FilterLookup.of(padded, weight, bias)
    expected = F.conv1d(padded.transpose(1, 2), weight, bias).transpose(1, 2)  # (B, 50, D)
    torch.testing.assert_close(lookup.all_responses(), expected)
    torch.testing.assert_close(lookup.responses(1, 7, 30), expected[1, 7:30])


def test_only_exact_one_hot_bases_without_a_gradient_are_looked_up():
    weight, bias = torch.randn(3, 4, 5), torch.randn(3)
    bases = bases_with_n(1, 20, 0, torch.float32)
    assert FilterLookup.of(bases, weight, bias) is not None
    soft = bases.clone()
    soft[0, 3] = 0.25  # a probability profile, as a motif's
    double = bases.clone()
    double[0, 4] = torch.tensor([1.0, 0.0, 1.0, 0.0])  # two bases at one position
    for refused in (soft, double, bases.clone().requires_grad_()):
        assert FilterLookup.of(refused, weight, bias) is None
    assert base_symbols(bases[:, :6]).tolist() == bases[:, :6].argmax(-1).where(bases[:, :6].sum(-1) > 0, 4).tolist()


CONV_STEMS = [("conv", "max", 4), ("conv_exp", "max", 128), ("conv_exp", "softmax", 128), ("conv_exp", "softmax", 4)]


@pytest.mark.parametrize("stem, patch_pool, patch", CONV_STEMS)
def test_a_conv_stem_trains_the_same_with_its_responses_looked_up_or_multiplied(stem, patch_pool, patch, monkeypatch):
    """The tokens and every parameter's gradient within float rounding of the matrix product's; bases that need
    a gradient (attributions) take the product and get it."""
    config = ModelConfig(d_model=8, n_heads=2, patch_size=patch, kernel_size=19, stem=stem, patch_pool=patch_pool)
    torch.manual_seed(0)
    tokenizer = EPITransformer(config).tokenizer
    bases = bases_with_n(2, patch * 6, 3, torch.float32)
    valid = torch.ones(2, patch * 6, dtype=torch.bool)
    valid[1, patch * 4 :] = False
    looked_up = []  # what each forward pass got: a look-up, or None (the product)

    def spy(padded, weight, bias, of=FilterLookup.of):
        looked_up.append(of(padded, weight, bias))
        return looked_up[-1]

    monkeypatch.setattr(transformer.FilterLookup, "of", spy)
    results = []
    for lookup in (True, False):
        monkeypatch.setattr(transformer, "LOOKUP_RESPONSES", lookup)
        tokens = tokenizer(bases, valid)[0]
        upstream = torch.randn(tokens.shape, generator=torch.Generator().manual_seed(1))
        results.append([tokens, *torch.autograd.grad((tokens * upstream).sum(), list(tokenizer.parameters()))])
    for from_table, multiplied in zip(*results, strict=True):
        torch.testing.assert_close(from_table, multiplied, rtol=1e-4, atol=1e-5)
    assert len(looked_up) == 1 and looked_up[0] is not None  # the product's pass never asked
    monkeypatch.setattr(transformer, "LOOKUP_RESPONSES", True)
    attributed = bases.clone().requires_grad_()
    tokenizer(attributed, valid)[0].sum().backward()
    assert looked_up[-1] is None and attributed.grad.abs().sum() > 0


def test_a_looked_up_softmax_pooled_stem_kept_or_recomputed_gives_the_same_gradients_bit_for_bit(monkeypatch):
    monkeypatch.setattr(transformer, "FUSED_POOL_RESPONSES", 128 * 8 * 2)  # several chunks a row
    config = ModelConfig(d_model=8, n_heads=2, patch_size=128, kernel_size=19, stem="conv_exp", patch_pool="softmax")
    torch.manual_seed(0)
    tokenizer = EPITransformer(config).tokenizer
    bases, valid = bases_with_n(2, 128 * 7, 4, torch.float32), torch.ones(2, 128 * 7, dtype=torch.bool)
    results = []
    for kept in (1 << 26, 0):
        monkeypatch.setattr(transformer, "FUSED_POOL_KEPT", kept)
        tokens = tokenizer(bases, valid)[0]
        results.append([tokens, *torch.autograd.grad(tokens.square().sum(), list(tokenizer.parameters()))])
    for kept, recomputed in zip(*results, strict=True):
        assert torch.equal(kept, recomputed)
