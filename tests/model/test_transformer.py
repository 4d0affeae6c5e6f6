from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from epiformer.model.configs import ATTENTIONS, DELTA_RULES
from epiformer.model.ops import linear_attention, softmax_attention
from epiformer.model.transformer import (
    HALF_LIVES,
    EPITransformer,
    ModelConfig,
    count_parameters,
    distance_features,
    patch_max,
    softmax_pool,
    softmax_pooled_filters,
)
from tests.helpers import quadratic_tensors, tensor_shapes_during


def one_hot(batch, length, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.one_hot(torch.randint(0, 4, (batch, length), generator=generator), 4).float()


# (stem, pool, element_pool); M7 first
READOUTS = [("linear", "mean", False), ("conv", "max", False), ("conv", "mean", False), ("linear", "max", False)]
READOUTS += [("conv", "max", True), ("linear", "mean", True), ("conv_exp", "max", True), ("conv_exp", "softmax", True)]
SPAN_READOUTS = [READOUTS[0], READOUTS[1], READOUTS[4], READOUTS[6], READOUTS[7]]


@pytest.mark.parametrize("stem, pool, element_pool", READOUTS)
@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("patch, kernel", [(1, 1), (4, 12), (3, 4)])
def test_output_does_not_change_when_padding_is_added(attention, patch, kernel, stem, pool, element_pool):
    torch.manual_seed(0)
    config = ModelConfig(
        attention=attention, d_model=16, n_heads=2, d_ff=32, patch_size=patch, kernel_size=kernel, dropout=0.0
    )
    model = EPITransformer(replace(config, stem=stem, pool=pool, element_pool=element_pool)).eval()
    enhancer, promoter = one_hot(1, 24, 1), one_hot(1, 18, 2)
    alone = model(enhancer, promoter)
    padded_e = torch.cat([enhancer, one_hot(1, 12, 3)], dim=1)  # garbage bases behind the mask
    padded_p = torch.cat([promoter, one_hot(1, 9, 4)], dim=1)
    valid_e = torch.arange(36)[None] < 24
    valid_p = torch.arange(27)[None] < 18
    together = model(padded_e, padded_p, valid_e, valid_p)
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_batches_may_mix_widths():
    torch.manual_seed(0)
    model = EPITransformer(ModelConfig(d_model=16, n_heads=2, d_ff=32, patch_size=4, kernel_size=8, dropout=0)).eval()
    short_e, short_p, long_e, long_p = one_hot(1, 16, 1), one_hot(1, 12, 2), one_hot(1, 32, 3), one_hot(1, 24, 4)
    batch_e = torch.cat([torch.nn.functional.pad(short_e, (0, 0, 0, 16)), long_e])
    batch_p = torch.cat([torch.nn.functional.pad(short_p, (0, 0, 0, 12)), long_p])
    valid_e = torch.stack([torch.arange(32) < 16, torch.ones(32, dtype=torch.bool)])
    valid_p = torch.stack([torch.arange(24) < 12, torch.ones(24, dtype=torch.bool)])
    mixed = model(batch_e, batch_p, valid_e, valid_p)
    torch.testing.assert_close(mixed, torch.cat([model(short_e, short_p), model(long_e, long_p)]), atol=1e-5, rtol=1e-5)


def test_linear_and_softmax_twins_differ_only_in_attention():
    linear = EPITransformer(ModelConfig(attention="linear", patch_size=4, kernel_size=12)).eval()
    softmax = EPITransformer(ModelConfig(attention="softmax", patch_size=4, kernel_size=12)).eval()
    assert count_parameters(linear) == count_parameters(softmax)
    softmax.load_state_dict(linear.state_dict())  # identical parameter names and shapes
    assert {block.attention.attend for block in linear.blocks} == {linear_attention}
    assert {block.attention.attend for block in softmax.blocks} == {softmax_attention}
    enhancer, promoter = one_hot(2, 40, 1), one_hot(2, 32, 2)
    with torch.no_grad():  # the same weights: what differs in the output is the attention
        assert not torch.allclose(linear(enhancer, promoter), softmax(enhancer, promoter), atol=1e-4)


@pytest.mark.parametrize("attention, forms_t_by_t", [(name, name == "softmax") for name in ATTENTIONS])
def test_only_the_softmax_twin_forms_t_by_t_attention_weights(attention, forms_t_by_t):
    """A whole forward and backward pass at T = 4,096 tokens (one a base), 256 times the head size."""
    torch.manual_seed(0)
    config = ModelConfig(
        attention=attention, d_model=32, n_heads=2, n_layers=1, d_ff=64, patch_size=1, kernel_size=1, dropout=0.0
    )
    model = EPITransformer(config)
    enhancer, promoter = one_hot(1, 2048, 1), one_hot(1, 2048, 2)
    valid = torch.ones(1, 2048, dtype=torch.bool)

    def forward_and_backward():
        with sdpa_kernel(SDPBackend.MATH):  # softmax's explicit path, whose T x T weights are tensors
            model(enhancer, promoter, valid, valid).sum().backward()

    assert bool(quadratic_tensors(tensor_shapes_during(forward_and_backward), 4096)) == forms_t_by_t


def test_config_rejects_impossible_shapes():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="kernel_size"):
        ModelConfig(patch_size=4, kernel_size=2)
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(attention="performer")
    with pytest.raises(ValueError, match="stem must be one of linear, conv"):
        ModelConfig(stem="cnn")
    with pytest.raises(ValueError, match="pool must be one of mean, max"):
        ModelConfig(pool="sum")


def test_the_softmax_token_pool_weighs_valid_tokens_by_softmax_of_sharpness_times_value():
    """Against the definition, row by row; sharpness 0 is the mean and a sharp pool the max; a row with no valid
    token pools to zeros, and its gradient stays finite."""
    torch.manual_seed(0)
    model = EPITransformer(ModelConfig(d_model=4, n_heads=2, pool="softmax"))
    x = torch.randn(3, 7, 4, dtype=torch.float64, requires_grad=True)
    valid = torch.tensor([[True] * 7, [True, False, True, True, False, False, True], [False] * 7])
    sharpness = torch.tensor([2.0, 0.5, 1.0, 3.0], dtype=torch.float64)
    with torch.no_grad():
        model.pool_sharpness.copy_(sharpness)
    model.double()
    pooled = model.pool(x, valid)
    for row in range(2):
        tokens = x[row, valid[row]]
        expected = (torch.softmax(tokens * sharpness, dim=0) * tokens).sum(dim=0)
        torch.testing.assert_close(pooled[row], expected)
    assert (pooled[2] == 0).all()
    pooled.sum().backward()
    assert torch.isfinite(x.grad).all() and (x.grad[2] == 0).all() and (x.grad[1, ~valid[1]] == 0).all()
    assert (x.grad[0] != 0).all()  # every valid token gets gradient, unlike a max
    with torch.no_grad():
        model.pool_sharpness.zero_()
        torch.testing.assert_close(model.pool(x, valid)[1], x[1, valid[1]].mean(dim=0))
        model.pool_sharpness.fill_(1e4)
        torch.testing.assert_close(model.pool(x, valid)[:2], torch.stack([x[0].amax(0), x[1, valid[1]].amax(0)]))


def test_distance_features_are_centred_log_distance_and_an_across_chromosome_flag():
    features = distance_features(torch.tensor([0, 99_999, 9, -1]))
    np.testing.assert_allclose(features[:, 0].numpy(), [-5.0, 0.0, -4.0, 0.0], atol=1e-6)
    assert features[:, 1].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_a_distance_aware_model_reads_the_distance_and_a_sequence_only_model_ignores_it():
    torch.manual_seed(0)
    enhancer, promoter = one_hot(3, 40, 1), one_hot(3, 32, 2)
    near, far = torch.full((3,), 2_000.0), torch.full((3,), 900_000.0)
    aware = EPITransformer(
        ModelConfig(d_model=16, n_heads=2, n_layers=1, patch_size=4, kernel_size=8, distance=True)
    ).eval()
    assert not torch.allclose(aware(enhancer, promoter, distance=near), aware(enhancer, promoter, distance=far))
    with pytest.raises(ValueError, match="distance"):
        aware(enhancer, promoter)
    blind = EPITransformer(ModelConfig(d_model=16, n_heads=2, n_layers=1, patch_size=4, kernel_size=8)).eval()
    torch.testing.assert_close(blind(enhancer, promoter, distance=near), blind(enhancer, promoter, distance=far))
    # The distance enters only the head: two more inputs to its first layer, and a linear term.
    assert count_parameters(aware) - count_parameters(blind) == 2 * 16 + 2 + 1


def span_model(attention="linear", patch=4, kernel=8, seed=0, stem="linear", pool="mean", element_pool=False):
    torch.manual_seed(seed)
    config = ModelConfig(
        attention=attention, input="span", d_model=16, n_heads=2, d_ff=32, patch_size=patch, kernel_size=kernel
    )
    return EPITransformer(replace(config, stem=stem, pool=pool, element_pool=element_pool)).eval()


def span_input(length, seed, first_end, second_start):
    """One span: one-hot [1, L, 4], segments enhancer | between | promoter, every base valid."""
    segment = torch.full((1, length), 2)
    segment[0, :first_end], segment[0, second_start:] = 0, 1
    return one_hot(1, length, seed), segment, torch.ones(1, length, dtype=torch.bool)


@pytest.mark.parametrize("stem, pool, element_pool", SPAN_READOUTS)
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_span_padded_in_a_batch_of_longer_spans_scores_as_alone(attention, stem, pool, element_pool):
    model = span_model(attention, stem=stem, pool=pool, element_pool=element_pool)
    short, long = span_input(37, 1, 8, 29), span_input(64, 2, 8, 52)
    alone = model(span=short[0], segment=short[1], span_valid=short[2])
    padded = [
        torch.cat([torch.nn.functional.pad(s, (0, 0, 0, 27) if s.dim() == 3 else (0, 27)), other])
        for s, other in zip(short, long)
    ]
    together = model(span=padded[0], segment=padded[1], span_valid=padded[2])
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        together[1], model(span=long[0], segment=long[1], span_valid=long[2])[0], atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("stem, pool, element_pool", SPAN_READOUTS)
def test_an_assembly_gap_is_neither_attended_nor_pooled_but_keeps_its_place(stem, pool, element_pool):
    model = span_model(stem=stem, pool=pool, element_pool=element_pool)
    span, segment, valid = span_input(40, 3, 8, 32)
    gap = torch.zeros(1, 16, 4)  # N bases: all-zero rows, not valid
    with_gap = torch.cat([span[:, :20], gap, span[:, 20:]], dim=1)
    gap_segment = torch.cat([segment[:, :20], torch.full((1, 16), 2), segment[:, 20:]], dim=1)
    gap_valid = with_gap.any(dim=-1)
    trailing = torch.cat([span, gap], dim=1), torch.cat([segment, torch.full((1, 16), 2)], dim=1)
    plain = model(span=span, segment=segment, span_valid=valid)
    # At the end, a gap is like padding: nothing changes.
    torch.testing.assert_close(
        model(span=trailing[0], segment=trailing[1], span_valid=trailing[0].any(dim=-1)), plain, atol=1e-5, rtol=1e-5
    )
    # Inside, its tokens are masked but positions still count it: the bases after it sit further along.
    inside = model(span=with_gap, segment=gap_segment, span_valid=gap_valid)
    assert not torch.allclose(inside, plain, atol=1e-4)
    garbage = with_gap.clone()
    garbage[:, 20:36] = one_hot(1, 16, 9)  # what lies under an invalid token does not matter
    torch.testing.assert_close(
        model(span=garbage, segment=gap_segment, span_valid=gap_valid), inside, atol=1e-5, rtol=1e-5
    )


def test_the_conv_stem_is_the_largest_relu_filter_response_within_each_patch():
    """Checked against the definition, base by base: filter k bases centred on each base, ReLU, max per patch."""
    torch.manual_seed(0)
    patch, kernel, length = 4, 5, 14  # 14 bases: the last patch is half padding (read as N)
    model = EPITransformer(ModelConfig(d_model=8, n_heads=2, patch_size=patch, kernel_size=kernel, stem="conv"))
    onehot, valid = one_hot(1, length, 3), torch.ones(1, length, dtype=torch.bool)
    tokens, token_valid = model.tokenizer(onehot, valid)
    weight, bias = model.tokenizer.project.weight, model.tokenizer.project.bias  # (D, 4, k), (D,)
    left = (kernel - 1) // 2
    bases = torch.nn.functional.pad(onehot[0], (0, 0, left, kernel - 1 - left + (-length % patch)))  # N beyond the ends
    response = torch.stack(
        [torch.relu((weight * bases[b : b + kernel].T[None]).sum(dim=(1, 2)) + bias) for b in range(16)]
    )  # (bases, D)
    expected = response.view(4, patch, -1).amax(dim=1)
    torch.testing.assert_close(tokens[0], expected)
    assert token_valid.tolist() == [[True] * 4]
    # The stem sees a site wherever it lies in the patch: a filter that is the site scores it as its maximum.
    site = torch.zeros(1, 12, 4)
    for offset in range(patch):
        site.zero_()
        site[0, 4 + offset, 2] = 1.0  # one G, in the second patch
        with torch.no_grad():
            model.tokenizer.project.weight.zero_()
            model.tokenizer.project.weight[0, 2, left] = 1.0  # channel 0 fires on a G at the centre
            model.tokenizer.project.bias.zero_()
        out, _ = model.tokenizer(site, torch.ones(1, 12, dtype=torch.bool))
        assert out[0, :, 0].tolist() == [0.0, 1.0, 0.0]


ACTIVATIONS = {"conv": torch.relu, "conv_exp": torch.exp}  # each conv stem's activation


def conv_then(stem, pool, onehot, weight, bias, patch):
    """A conv stem from PyTorch's own layers: Conv1d and the activation at every base, then `pool` over each patch.

    [B, L, 4] -> [B, T, D]. `pool` is "amax" (the gradient shared among tied maxima) or
    "max_pool1d" (MaxPool1d: all of it to the first).
    """
    kernel = weight.shape[-1]
    left = (kernel - 1) // 2
    x = torch.nn.functional.pad(onehot.transpose(1, 2), (left, kernel - 1 - left + (-onehot.shape[1] % patch)))
    responses = ACTIVATIONS[stem](torch.nn.functional.conv1d(x, weight, bias))  # (B, D, L + tail)
    if pool == "max_pool1d":
        return torch.nn.functional.max_pool1d(responses, patch).transpose(1, 2)
    return responses.view(*responses.shape[:2], -1, patch).amax(dim=-1).transpose(1, 2)


def stem_and_gradients(stem, onehot, valid, upstream, weight, bias):
    """The stem's tokens and the gradients of (tokens * upstream).sum() for the filters, the bias and the bases."""
    bases = onehot.clone().requires_grad_()
    tokens = stem(bases, valid)
    filters_grad, bias_grad, bases_grad = torch.autograd.grad((tokens * upstream).sum(), (weight, bias, bases))
    return {"tokens": tokens, "filters": filters_grad, "bias": bias_grad, "bases": bases_grad}


@pytest.mark.parametrize("patch, kernel", [(1, 1), (1, 5), (4, 4), (4, 8), (4, 19)])
@pytest.mark.parametrize("sequence", ["random", "one base repeated"])
@pytest.mark.parametrize("stem", ["conv", "conv_exp"])
def test_the_conv_stems_and_their_gradients_are_those_of_conv1d_the_activation_and_max_pooling(
    patch, kernel, sequence, stem
):
    """Values and gradients (filters, bias, and the bases, which attributions read) against the layers themselves.

    A run of one base makes identical windows within a patch: tied maxima. The stem shares
    their gradient, as amax does; MaxPool1d gives it to the first, which moves the bases'
    gradient but not the filters'. With ReLU, maxima at or below 0 pass no gradient.
    """
    torch.manual_seed(patch * 100 + kernel)
    length = 45  # not a multiple of 4: the last token is part padding
    model = EPITransformer(ModelConfig(d_model=8, n_heads=2, patch_size=patch, kernel_size=kernel, stem=stem))
    onehot, valid = one_hot(3, length, 5), torch.ones(3, length, dtype=torch.bool)
    valid[1, 10:17] = False  # an assembly gap: read as N
    if sequence == "one base repeated":
        onehot[:, 14:40] = torch.tensor([0.0, 0.0, 1.0, 0.0])
    upstream = torch.randn(3, -(-length // patch), 8)
    weight, bias = model.tokenizer.project.weight, model.tokenizer.project.bias

    def ours(bases, valid):
        return model.tokenizer(bases, valid)[0]

    def layers(pool):
        return lambda bases, valid: conv_then(stem, pool, bases * valid[..., None], weight, bias, patch)

    got = stem_and_gradients(ours, onehot, valid, upstream, weight, bias)
    shared = stem_and_gradients(layers("amax"), onehot, valid, upstream, weight, bias)
    first = stem_and_gradients(layers("max_pool1d"), onehot, valid, upstream, weight, bias)
    for name in ("tokens", "filters", "bias", "bases"):
        torch.testing.assert_close(got[name], shared[name], atol=1e-5, rtol=1e-5)
    for name in ("tokens", "filters", "bias"):
        torch.testing.assert_close(got[name], first[name], atol=1e-5, rtol=1e-5)
    # What the comparisons above exercise: maxima on both sides of 0, and ties where the bases repeat.
    below_zero = (got["tokens"] == 0) if stem == "conv" else (got["tokens"] < 1)
    assert below_zero.any() and (~below_zero).any()
    if sequence == "one base repeated" and patch > 1:
        assert not torch.allclose(got["bases"], first["bases"])  # the shared gradient is not MaxPool1d's


@pytest.mark.parametrize("patch, kernel", [(16, 19), (24, 5), (128, 11)])
@pytest.mark.parametrize("stem", ["conv", "conv_exp"])
def test_coarse_patches_computed_8_bases_at_a_time_are_conv1d_and_max_pooling(patch, kernel, stem):
    """A patch that is a multiple of 8 has its responses computed 8 bases at a time and pooled as one; a filter
    may be narrower than the patch. Values and gradients against the layers themselves."""
    torch.manual_seed(patch + kernel)
    length = 3 * patch - 5
    model = EPITransformer(ModelConfig(d_model=8, n_heads=2, patch_size=patch, kernel_size=kernel, stem=stem))
    assert model.tokenizer.block == (8 if patch % 8 == 0 else patch)
    onehot, valid = one_hot(2, length, 5), torch.ones(2, length, dtype=torch.bool)
    valid[1, 10:17] = False
    upstream = torch.randn(2, 3, 8)
    weight, bias = model.tokenizer.project.weight, model.tokenizer.project.bias
    got = stem_and_gradients(lambda b, v: model.tokenizer(b, v)[0], onehot, valid, upstream, weight, bias)
    layers = lambda b, v: conv_then(stem, "amax", b * v[..., None], weight, bias, patch)  # noqa: E731
    expected = stem_and_gradients(layers, onehot, valid, upstream, weight, bias)
    for name in ("tokens", "filters", "bias", "bases"):
        torch.testing.assert_close(got[name], expected[name], atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("activation", ["relu", "exp"])
def test_patch_max_has_the_gradient_of_its_definition(activation):
    """Finite differences in float64, away from ties and from 0 (where ReLU has no derivative)."""
    responses = (torch.randperm(3 * 5 * 4 * 6, dtype=torch.float64).view(3, 5, 4, 6) - 100) / 37 + 0.01
    assert torch.autograd.gradcheck(lambda x: patch_max(x, activation), (responses.requires_grad_(),))


def softmax_pooled_conv(stem, onehot, weight, bias, sharpness, patch):
    """patch_pool softmax from PyTorch's own layers: Conv1d at every base, then over each patch the responses
    weighted by softmax(sharpness x response) and summed, then the activation. [B, L, 4] -> [B, T, D]."""
    kernel = weight.shape[-1]
    left = (kernel - 1) // 2
    x = torch.nn.functional.pad(onehot.transpose(1, 2), (left, kernel - 1 - left + (-onehot.shape[1] % patch)))
    responses = torch.nn.functional.conv1d(x, weight, bias)  # (B, D, L + tail)
    responses = responses.view(*responses.shape[:2], -1, patch)  # (B, D, T, p)
    weights = torch.softmax(responses * sharpness[None, :, None, None], dim=-1)
    return ACTIVATIONS[stem]((weights * responses).sum(dim=-1)).transpose(1, 2)


@pytest.mark.parametrize("patch, kernel", [(4, 19), (32, 19), (128, 11), (10, 5)])
@pytest.mark.parametrize("stem", ["conv", "conv_exp"])
def test_softmax_patch_pooling_and_its_gradients_are_those_of_conv1d_and_a_softmax_weighted_sum(patch, kernel, stem):
    """Coarse patches (32, 128: computed 4 bases at a time), a filter narrower than the patch, and a patch that is
    no multiple of 4, against the layers themselves; the sharpness is learned, so its gradient is checked too."""
    torch.manual_seed(patch + kernel)
    length = 3 * patch - 3  # the last token is part padding
    config = ModelConfig(d_model=8, n_heads=2, patch_size=patch, kernel_size=kernel, stem=stem, patch_pool="softmax")
    model = EPITransformer(config)
    tokenizer = model.tokenizer
    with torch.no_grad():
        tokenizer.sharpness.copy_(torch.linspace(0.5, 4.0, 8))  # each filter its own
    onehot, valid = one_hot(2, length, 5), torch.ones(2, length, dtype=torch.bool)
    valid[1, 3:9] = False  # an assembly gap: read as N
    upstream = torch.randn(2, 3, 8)
    parameters = (tokenizer.project.weight, tokenizer.project.bias, tokenizer.sharpness)

    def outputs(stem_function):
        bases = onehot.clone().requires_grad_()
        tokens = stem_function(bases, valid)
        return (tokens, *torch.autograd.grad((tokens * upstream).sum(), (*parameters, bases)))

    got = outputs(lambda bases, valid: tokenizer(bases, valid)[0])
    expected = outputs(lambda bases, valid: softmax_pooled_conv(stem, bases * valid[..., None], *parameters, patch))
    for name, ours, theirs in zip(("tokens", "filters", "bias", "sharpness", "bases"), got, expected):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4, msg=name)
    assert tokenizer.block == (4 if patch % 4 == 0 else patch)


def test_softmax_pooling_lies_between_the_mean_and_the_max_and_gives_every_position_gradient():
    """What it is for: a max passes gradient to each patch's best response only; the softmax pool to all of them,
    more to the larger; a sharp pool is the max."""
    responses = torch.randn(2, 5, 32, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    pooled = softmax_pool(responses, torch.full((6,), 2.0, dtype=torch.float64), "relu")
    assert (pooled <= responses.amax(dim=2).clamp(min=0) + 1e-12).all()
    assert (pooled >= responses.mean(dim=2).clamp(min=0) - 1e-12).all()
    sharp = softmax_pool(responses, torch.full((6,), 1e5, dtype=torch.float64), "exp")
    torch.testing.assert_close(sharp, torch.exp(responses.amax(dim=2)), rtol=1e-6, atol=1e-9)
    soft_input, hard_input = responses.clone().requires_grad_(), responses.clone().requires_grad_()
    softmax_pool(soft_input, torch.full((6,), 2.0, dtype=torch.float64), "exp").sum().backward()
    patch_max(hard_input, "exp").sum().backward()
    assert (soft_input.grad != 0).all()  # every position (low ones pushed down, high ones up)
    assert ((hard_input.grad > 0).sum(dim=2) == 1).all()  # one winner a patch
    check = (responses[:1, :2, :4, :3].clone().requires_grad_(), torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda r, s: softmax_pool(r, s, "exp"), (check[0], check[1].requires_grad_()))


@pytest.mark.parametrize("patch, block, chunk", [(32, 8, 32 * 3), (8, 8, 1 << 16), (12, 12, 12 * 3 * 2)])
def test_fused_softmax_pooled_filters_are_the_layers_they_fuse_in_any_chunking(patch, block, chunk, monkeypatch):
    """One token a chunk, a chunk across both batch rows' tokens, two tokens a chunk: the same tokens and gradients
    (windows, block filters, bias, sharpness) as F.linear then softmax_pool, and float64 finite differences."""
    import epiformer.model.transformer as transformer

    monkeypatch.setattr(transformer, "FUSED_POOL_RESPONSES", chunk)
    generator = torch.Generator().manual_seed(patch)
    filters, width, tokens = 3, 4 * (5 + block - 1), 3
    windows = torch.randn(2, tokens * patch // block, width, dtype=torch.float64, generator=generator)
    weight = torch.randn(block * filters, width, dtype=torch.float64, generator=generator) / 4
    bias = torch.randn(block * filters, dtype=torch.float64, generator=generator)
    sharpness = torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (windows, weight, bias, sharpness)]
    upstream = torch.randn(2, tokens, filters, dtype=torch.float64, generator=generator)

    def layers(windows, weight, bias, sharpness, activation):
        responses = torch.nn.functional.linear(windows, weight, bias).view(2, tokens, patch, filters)
        return softmax_pool(responses, sharpness, activation)

    for activation in ("exp", "relu"):
        fused = softmax_pooled_filters(*inputs, patch, activation)
        separate = layers(*inputs, activation)
        torch.testing.assert_close(fused, separate)
        fused_grads = torch.autograd.grad((fused * upstream).sum(), inputs)
        separate_grads = torch.autograd.grad((separate * upstream).sum(), inputs)
        for name, ours, theirs in zip(("windows", "weight", "bias", "sharpness"), fused_grads, separate_grads):
            torch.testing.assert_close(ours, theirs, msg=f"{activation}: {name}")
    assert torch.autograd.gradcheck(lambda *x: softmax_pooled_filters(*x, patch, "exp"), inputs)


@pytest.mark.parametrize("activation", ["exp", "relu"])
def test_fused_filters_kept_for_the_backward_pass_give_the_recomputed_gradients_bit_for_bit(activation, monkeypatch):
    import epiformer.model.transformer as transformer

    monkeypatch.setattr(transformer, "FUSED_POOL_RESPONSES", 32 * 3 * 2)  # several chunks a row
    generator = torch.Generator().manual_seed(1)
    windows = torch.randn(2, 5 * 32 // 8, 4 * (19 + 7), generator=generator)
    weight = torch.randn(8 * 3, 4 * (19 + 7), generator=generator) / 4
    bias, sharpness = torch.randn(8 * 3, generator=generator), torch.tensor([0.5, 2.0, 3.0])
    upstream = torch.randn(2, 5, 3, generator=generator)
    results = []
    for kept in (1 << 26, 0):
        monkeypatch.setattr(transformer, "FUSED_POOL_KEPT", kept)
        inputs = [t.clone().requires_grad_() for t in (windows, weight, bias, sharpness)]
        out = softmax_pooled_filters(*inputs, 32, activation)
        results.append([out, *torch.autograd.grad((out * upstream).sum(), inputs)])
    for kept, recomputed in zip(*results):
        assert torch.equal(kept, recomputed)


def test_a_softmax_pooled_stem_beyond_the_kept_limit_keeps_no_per_base_tensor_for_the_backward_pass(monkeypatch):
    """What the fusion is for: a span's step keeps its tokens, not a response per base and filter, once its
    responses are more than FUSED_POOL_KEPT; below it, it keeps them (and their weights) instead."""
    import epiformer.model.transformer as transformer

    config = ModelConfig(d_model=8, n_heads=2, patch_size=128, kernel_size=19, stem="conv_exp", patch_pool="softmax")
    tokenizer = EPITransformer(config).tokenizer
    onehot, valid = one_hot(1, 128 * 40, 3), torch.ones(1, 128 * 40, dtype=torch.bool)
    responses = 128 * 40 * 8  # a response a base and filter
    largest = {}
    for limit in (responses - 1, responses):  # one response fewer than the step has, and all of them
        monkeypatch.setattr(transformer, "FUSED_POOL_KEPT", limit)
        saved = []

        def keep(tensor, saved=saved):
            saved.append(tensor.untyped_storage().nbytes() // tensor.element_size())  # views: their storage
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            tokenizer(onehot, valid)[0].sum().backward()
        largest[limit] = max(saved)
    assert largest[responses - 1] < responses  # the padded bases (4 floats a base), not a response a base and filter
    assert largest[responses] == responses  # kept


def test_patch_pool_softmax_needs_a_conv_stem_and_a_max_pooled_model_has_no_sharpness():
    with pytest.raises(ValueError, match="patch_pool 'softmax' pools a conv stem"):
        ModelConfig(stem="linear", patch_pool="softmax")
    with pytest.raises(ValueError, match="patch_pool must be one of max, softmax"):
        ModelConfig(stem="conv", patch_pool="mean")
    plain = EPITransformer(ModelConfig(d_model=8, n_heads=2, patch_size=4, kernel_size=8, stem="conv_exp"))
    assert plain.tokenizer.sharpness is None and not any("sharpness" in name for name, _ in plain.named_parameters())


@pytest.mark.parametrize("stem", ["conv_exp", "conv_tower"])
def test_a_softmax_pooled_span_scores_the_same_alone_as_padded_and_recomputed(stem, monkeypatch):
    import epiformer.model.transformer as transformer

    torch.manual_seed(0)
    config = ModelConfig(
        attention="linear", input="span", d_model=16, n_heads=2, d_ff=32, patch_size=32, kernel_size=19,
        stem=stem, pool="max", element_pool=True, dropout=0.0, patch_pool="softmax",
    )  # fmt: skip
    model = EPITransformer(config).eval()
    short, longer = span_input(301, 1, 80, 220), span_input(700, 2, 150, 600)
    padded = [
        torch.cat([torch.nn.functional.pad(s, (0, 0, 0, 399) if s.dim() == 3 else (0, 399)), other])
        for s, other in zip(short, longer)
    ]
    alone = model(span=short[0], segment=short[1], span_valid=short[2])
    together = model(span=padded[0], segment=padded[1], span_valid=padded[2])
    torch.testing.assert_close(together[:1], alone, atol=1e-5, rtol=1e-5)
    model.train()
    loss, grads = training_step(model, longer)
    monkeypatch.setattr(transformer, "RECOMPUTE_TOKENS", 8)
    recomputed_loss, recomputed_grads = training_step(model, longer)
    torch.testing.assert_close(recomputed_loss, loss, atol=1e-6, rtol=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_zero_init_blocks_start_as_the_identity_and_still_learn():
    """With zero_init the stem's tokens reach the final norm unchanged (the block stack is the identity at first),
    yet every block's output projections get gradient on the first step, so the blocks grow in."""
    torch.manual_seed(0)
    config = ModelConfig(d_model=16, n_heads=2, d_ff=32, patch_size=4, kernel_size=8, dropout=0.0, zero_init=True)
    model = EPITransformer(config)
    x = torch.randn(2, 9, 16)
    for block in model.blocks:
        torch.testing.assert_close(block(x, None), x)
    model(one_hot(2, 24, 1), one_hot(2, 20, 2)).sum().backward()
    for block in model.blocks:
        assert block.attention.out.weight.grad.abs().sum() > 0 and block.feed_forward[-1].weight.grad.abs().sum() > 0
    default = EPITransformer(replace(config, zero_init=False))
    assert all(block.attention.out.weight.abs().sum() > 0 for block in default.blocks)  # the default init untouched


def test_max_pooling_takes_each_channel_largest_value_over_valid_tokens_only():
    model = span_model(pool="max")
    tokens = torch.tensor([[[1.0, -5.0], [3.0, -2.0], [9.0, 9.0]], [[-1.0, 0.5], [0.0, 0.0], [0.0, 0.0]]])
    valid = torch.tensor([[True, True, False], [True, False, False]])
    torch.testing.assert_close(model.pool(tokens, valid), torch.tensor([[3.0, -2.0], [-1.0, 0.5]]))
    # Against the mean, one site's value does not shrink as the span grows.
    for length in (4, 4000):
        x = torch.zeros(1, length, 2)
        x[0, 0, 1] = 10.0
        every = torch.ones(1, length, dtype=torch.bool)
        assert model.pool(x, every)[0, 1] == 10.0
        torch.testing.assert_close(span_model().pool(x, every)[0, 1], torch.tensor(10.0 / length))
    # A row without a valid token pools to zeros, not -inf, and passes gradients back without NaN.
    tokens.requires_grad_(True)
    empty = model.pool(tokens, torch.zeros(2, 3, dtype=torch.bool))
    empty.sum().backward()
    assert torch.equal(empty, torch.zeros(2, 2)) and not tokens.grad.isnan().any()


@pytest.mark.parametrize("pool", ["max", "mean"])
def test_element_pooling_gives_the_head_the_whole_and_each_element_pooled_on_its_own(pool):
    """The head reads [all | enhancer | promoter], each pooled over its valid tokens only."""
    model = span_model(stem="conv", pool=pool, element_pool=True)
    span, segment, valid = span_input(48, 5, 12, 36)  # tokens 0-2 enhancer, 3-8 between, 9-11 promoter
    valid[0, 40:44] = False  # a gap in the promoter: token 10 is not pooled
    seen = {}
    model.norm.register_forward_hook(lambda module, args, out: seen.update(tokens=out))
    model.head.register_forward_pre_hook(lambda module, args: seen.update(head_in=args[0]))
    model(span=span, segment=segment, span_valid=valid)
    tokens = seen["tokens"][0]  # (T, D)
    reduce = (lambda x: x.amax(dim=0)) if pool == "max" else (lambda x: x.mean(dim=0))
    every = [t for t in range(12) if t != 10]
    expected = torch.cat([reduce(tokens[every]), reduce(tokens[[0, 1, 2]]), reduce(tokens[[9, 11]])])
    torch.testing.assert_close(seen["head_in"][0], expected)
    # An element with no valid token (all N) pools to zeros, and gradients stay finite.
    train_model = span_model(stem="conv", pool=pool, element_pool=True).train()
    train_model.head.register_forward_pre_hook(lambda module, args: seen.update(head_in=args[0]))
    no_promoter = valid.clone()
    no_promoter[0, 36:] = False
    train_model(span=span, segment=segment, span_valid=no_promoter).sum().backward()
    assert torch.equal(seen["head_in"][0, 32:], torch.zeros(16))
    assert all(p.grad is None or p.grad.isfinite().all() for p in train_model.parameters())


def test_element_pooling_on_element_windows_keeps_the_enhancer_apart_from_the_promoter():
    torch.manual_seed(0)
    config = ModelConfig(d_model=16, n_heads=2, d_ff=32, patch_size=4, kernel_size=8, dropout=0.0, element_pool=True)
    model = EPITransformer(config).eval()
    plain = EPITransformer(replace(config, element_pool=False))
    assert count_parameters(model) - count_parameters(plain) == 2 * 16 * 16  # the head's first layer reads 3 x D
    seen = {}
    model.norm.register_forward_hook(lambda module, args, out: seen.update(tokens=out))
    model.head.register_forward_pre_hook(lambda module, args: seen.update(head_in=args[0]))
    model(one_hot(1, 24, 1), one_hot(1, 16, 2))  # 6 enhancer tokens, then 4 promoter tokens
    tokens = seen["tokens"][0]
    means = [tokens.mean(dim=0), tokens[:6].mean(dim=0), tokens[6:].mean(dim=0)]
    torch.testing.assert_close(seen["head_in"][0], torch.cat(means))


def test_a_span_model_embeds_three_segments_and_reads_them():
    model = span_model()
    assert model.segment.weight.shape[0] == 3
    assert (
        EPITransformer(ModelConfig(d_model=16, n_heads=2, d_ff=32)).segment.weight.shape[0] == 2
    )  # saved element models load
    span, segment, valid = span_input(48, 4, 8, 40)
    swapped = torch.where(segment == 2, segment, 1 - segment)  # enhancer and promoter exchanged
    assert not torch.allclose(
        model(span=span, segment=segment, span_valid=valid), model(span=span, segment=swapped, span_valid=valid)
    )
    with pytest.raises(ValueError, match="reads spans"):
        model(one_hot(1, 16, 1), one_hot(1, 16, 2))


def test_a_linear_span_model_forms_no_t_by_t_tensor():
    model = span_model(patch=1, kernel=1)
    length = 4096
    span, segment, valid = span_input(length, 5, 100, 4000)
    shapes = tensor_shapes_during(lambda: model(span=span, segment=segment, span_valid=valid).sum().backward())
    assert shapes and not quadratic_tensors(shapes, length)


def training_step(model, inputs, seed=5):
    """Loss and every parameter's gradient of one training step (dropout on) from `seed`."""
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    loss = model(span=inputs[0], segment=inputs[1], span_valid=inputs[2]).sum()
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("stem", ["linear", "conv_exp"])
def test_recomputing_long_batches_gives_the_same_loss_and_gradients(stem, monkeypatch):
    import epiformer.model.transformer as transformer

    model = span_model(stem=stem, kernel=19 if stem != "linear" else 8)
    model = EPITransformer(replace(model.config, dropout=0.2))  # dropout: recomputation must replay its masks
    model.load_state_dict(span_model(stem=stem, kernel=19 if stem != "linear" else 8).state_dict())
    inputs = span_input(1001, 4, 300, 700)  # 251 tokens: chunks of 64 leave a short last one
    loss, grads = training_step(model, inputs)
    monkeypatch.setattr(transformer, "RECOMPUTE_TOKENS", 64)
    assert transformer.recomputing(251)
    shapes = tensor_shapes_during(lambda: training_step(model, inputs))
    recomputed_loss, recomputed_grads = training_step(model, inputs)
    torch.testing.assert_close(recomputed_loss, loss, atol=1e-6, rtol=1e-6)
    assert recomputed_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, atol=1e-6, rtol=1e-5, msg=name)
    if stem != "linear":  # the conv stem's per-base responses [B, t, p, D]: a chunk's, never the span's
        responses = [shape for _, shape in shapes if len(shape) == 4 and shape[2:] == (4, 16)]
        assert responses and max(shape[1] for shape in responses) == 64
    with torch.no_grad():  # scoring never recomputes: nothing to keep for a backward pass
        assert not transformer.recomputing(10**9)
    model.eval()  # attributions take gradients in eval mode: a long span recomputes there too
    assert transformer.recomputing(251)


@pytest.mark.parametrize("patch", [4, 32, 128])
@pytest.mark.parametrize("d_model", [16, 32, 128])
def test_positions_stay_distinct_over_the_longest_span_max_span_allows(patch, d_model):
    """The default max_span at every resolution: the lowest frequency's (sin, cos) goes less than once round the
    circle over the span, so no two of its positions coincide; the standard table (base 10,000) wraps."""
    from epiformer.model.configs import with_span_positions
    from epiformer.model.transformer import POSITION_BASE, position_base, sinusoidal_positions

    max_span = 2_100_000  # config/config.yaml's windows.max_span
    settings = with_span_positions(
        {"input": "span", "patch_size": patch, "kernel_size": patch, "d_model": d_model}, max_span
    )
    config = ModelConfig(**settings, n_heads=2)
    tokens = config.max_positions
    assert tokens * patch >= max_span
    table = sinusoidal_positions(tokens, d_model, base=position_base(d_model, tokens))
    angle = np.unwrap(np.arctan2(table[:, -2].double().numpy(), table[:, -1].double().numpy()))
    assert (np.diff(angle) > 0).all() and angle[-1] - angle[0] < 2 * np.pi
    neighbours = (table[1:] - table[:-1]).norm(dim=1)
    assert neighbours.min() > 1e-3  # next-door positions differ too, through the high frequencies
    standard = sinusoidal_positions(tokens, d_model, base=POSITION_BASE)
    wrapped = np.unwrap(np.arctan2(standard[:, -2].double().numpy(), standard[:, -1].double().numpy()))
    if 2 * np.pi * POSITION_BASE ** ((d_model - 2) / d_model) < tokens:
        assert wrapped[-1] - wrapped[0] > 2 * np.pi  # what the larger base is for


def test_element_models_and_short_spans_keep_the_standard_positions():
    from epiformer.model.configs import with_span_positions
    from epiformer.model.transformer import POSITION_BASE, position_base

    assert with_span_positions({"input": "elements", "patch_size": 4}, 2_100_000) == {
        "input": "elements",
        "patch_size": 4,
    }
    assert (
        position_base(32, with_span_positions({"input": "span", "patch_size": 4}, 60_000)["max_positions"])
        == POSITION_BASE
    )
    assert position_base(32, 0) == POSITION_BASE


def tower_model(patch: int, attention: str = "linear", dropout: float = 0.0, seed: int = 0) -> EPITransformer:
    torch.manual_seed(seed)
    config = ModelConfig(
        attention=attention, input="span", d_model=32, n_heads=4, d_ff=64, patch_size=patch, kernel_size=11,
        stem="conv_tower", pool="max", element_pool=True, dropout=dropout,
    )  # fmt: skip
    return EPITransformer(config).eval()


@pytest.mark.parametrize("patch", [8, 32, 128])
def test_the_conv_tower_reaches_the_patch_with_a_quarter_of_the_filters_at_every_base(patch):
    model = tower_model(patch)
    tokenizer = model.tokenizer
    assert tokenizer.project.out_channels == 8 and tokenizer.filter_pool == 8
    assert np.prod(tokenizer.tower.factors) * 8 == patch and all(f in (1, 2, 4) for f in tokenizer.tower.factors)
    span, segment, valid = span_input(1001, 5, 300, 700)
    tokens, token_valid = tokenizer(span, valid)
    assert tokens.shape == (1, -(-1001 // patch), 32) and token_valid.all()
    with pytest.raises(ValueError, match="power of two of at least 8"):
        ModelConfig(input="span", patch_size=24, kernel_size=11, stem="conv_tower")


@pytest.mark.parametrize("patch", [32, 128])
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_span_scores_the_same_alone_as_padded_by_a_conv_tower(attention, patch):
    model = tower_model(patch, attention)
    short, long = span_input(1001, 1, 300, 700), span_input(2600, 2, 300, 2200)
    alone = model(span=short[0], segment=short[1], span_valid=short[2])
    extra = 2600 - 1001
    padded = [
        torch.cat([torch.nn.functional.pad(s, (0, 0, 0, extra) if s.dim() == 3 else (0, extra)), other])
        for s, other in zip(short, long)
    ]
    together = model(span=padded[0], segment=padded[1], span_valid=padded[2])
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=1e-5)
    gap = short[0].clone()
    gap[:, 400:600] = 0  # an assembly gap: what lies under it does not matter
    garbage = short[0].clone()
    garbage[:, 400:600] = one_hot(1, 200, 9)
    gap_valid = gap.any(dim=-1)
    torch.testing.assert_close(
        model(span=garbage, segment=short[1], span_valid=gap_valid),
        model(span=gap, segment=short[1], span_valid=gap_valid),
        atol=1e-5,
        rtol=1e-5,
    )


def test_a_conv_tower_recomputes_long_batches_to_the_same_loss_and_gradients(monkeypatch):
    import epiformer.model.transformer as transformer

    model = tower_model(32, dropout=0.2).train()
    inputs = span_input(4001, 4, 300, 3700)
    loss, grads = training_step(model, inputs)
    monkeypatch.setattr(transformer, "RECOMPUTE_TOKENS", 64)  # 500 first-stage tokens: chunks of 64
    recomputed_loss, recomputed_grads = training_step(model, inputs)
    torch.testing.assert_close(recomputed_loss, loss, atol=1e-6, rtol=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("attention", DELTA_RULES)
def test_a_delta_rule_model_is_the_linear_model_with_each_heads_beta_and_decay(attention):
    torch.manual_seed(0)
    config = ModelConfig(attention=attention, d_model=16, n_heads=4, d_ff=32, patch_size=4, kernel_size=8)
    delta, linear = EPITransformer(config).eval(), EPITransformer(replace(config, attention="linear")).eval()
    extra = {name: p.shape for name, p in delta.named_parameters()}.items() - {
        name: p.shape for name, p in linear.named_parameters()
    }.items()
    added = {"beta"} | ({"decay"} if attention == "gated_deltanet" else set())
    assert {name.split(".")[-2] for name, _ in extra} == added  # per block: a [H, D] map and its bias each
    assert count_parameters(delta) - count_parameters(linear) == config.n_layers * len(added) * (16 + 1) * 4
    if attention == "gated_deltanet":
        layer = delta.blocks[0].attention
        rate = torch.nn.functional.softplus(layer.decay.bias)  # -log(decay) of a token that adds nothing
        half_lives = torch.log(torch.tensor(2.0)) / rate
        torch.testing.assert_close(half_lives[[0, -1]], torch.tensor(HALF_LIVES), rtol=1e-4, atol=0)
    enhancer, promoter = one_hot(2, 40, 1), one_hot(2, 32, 2)
    logits = delta(enhancer, promoter)
    assert logits.shape == (2,) and torch.isfinite(logits).all()


@pytest.mark.parametrize("attention", DELTA_RULES)
def test_a_delta_rule_model_reads_both_ways(attention):
    # A base changed near the end of the enhancer moves the enhancer's first tokens only through the backward scan.
    torch.manual_seed(0)
    config = ModelConfig(attention=attention, d_model=16, n_heads=2, n_layers=1, d_ff=32, patch_size=4, kernel_size=4)
    layer = EPITransformer(config).blocks[0].attention.eval()
    x = torch.randn(1, 12, 16)
    changed = x.clone()
    changed[0, -1] += 1.0
    with torch.no_grad():
        first, again = layer(x, None), layer(changed, None)
    assert not torch.allclose(first[0, 0], again[0, 0])  # the first token read the last one


@pytest.mark.parametrize("positions, same", [("none", True), ("sinusoidal", False)])
def test_without_positions_a_span_is_its_tokens_and_segments_whatever_their_order(positions, same):
    """positions none: swapping two whole tokens of the between segment leaves the score; with sinusoids it moves."""
    torch.manual_seed(0)
    config = ModelConfig(
        attention="linear", input="span", d_model=16, n_heads=2, d_ff=32, patch_size=8, kernel_size=1,
        stem="conv_exp", pool="max", element_pool=True, dropout=0.0, positions=positions,
    )  # fmt: skip
    model = EPITransformer(config).eval()
    span, segment, valid = span_input(96, 4, 16, 80)  # 12 tokens: 2 enhancer, 8 between, 2 promoter
    swapped = span.clone()
    swapped[0, 24:32], swapped[0, 56:64] = span[0, 56:64], span[0, 24:32]  # between tokens 3 and 7
    assert not torch.equal(swapped, span)
    before = model(span=span, segment=segment, span_valid=valid)
    after = model(span=swapped, segment=segment, span_valid=valid)
    assert torch.allclose(before, after, atol=1e-6) == same


def fine_element_model(element_patch=2, seed=0, attention="linear"):
    """A span model at 8 bases a token over the between-sequence and `element_patch` over each element."""
    torch.manual_seed(seed)
    config = ModelConfig(
        attention=attention, input="span", d_model=16, n_heads=2, d_ff=32, patch_size=8, kernel_size=5, dropout=0.0,
        stem="conv_exp", patch_pool="softmax", pool="max", element_pool=True, zero_init=True, positions="none",
        element_patch_size=element_patch,
    )  # fmt: skip
    return EPITransformer(config).eval()


def test_element_bases_cut_each_element_from_its_span_whichever_end_it_lies_at():
    from epiformer.model.transformer import element_bases

    span = one_hot(3, 40, 11)
    segment = torch.full((3, 40), 2)
    segment[0, :8], segment[0, 30:] = 0, 1  # enhancer first
    segment[1, :6], segment[1, 30:] = 1, 0  # promoter first (a reverse-complemented span), a longer enhancer
    segment[2, :8], segment[2, 20:28] = 0, 1  # a span padded after its promoter (bases 28 on are padding)
    valid = torch.ones(3, 40, dtype=torch.bool)
    valid[0, 3] = False  # an N in the first enhancer
    valid[2, 28:] = False
    bases, cut_valid = element_bases(span, segment, valid, 0)
    assert bases.shape == (3, 10, 4)  # the longest enhancer in the batch: 10 bases
    torch.testing.assert_close(bases[0, :8], span[0, :8] * valid[0, :8, None])
    torch.testing.assert_close(bases[1], span[1, 30:])
    # Bases past a row's own element are padding: invalid and zero, never the sequence after it.
    assert cut_valid[0].tolist() == [True] * 3 + [False] + [True] * 4 + [False] * 2
    assert cut_valid[2].tolist() == [True] * 8 + [False] * 2 and not bases[2, 8:].any()
    promoter, promoter_valid = element_bases(span, segment, valid, 1)
    torch.testing.assert_close(promoter[1, :6], span[1, :6])
    torch.testing.assert_close(promoter[2], span[2, 20:30] * promoter_valid[2, :, None])
    assert promoter_valid.sum(dim=1).tolist() == [10, 6, 8]
    # A row without the segment cuts nothing valid; a batch without it, one invalid base a row; a cut that
    # would run past the span's end stays inside it (its extra bases invalid).
    ends = torch.full((3, 12), 2)
    ends[0, :5], ends[1, 9:] = 0, 0  # enhancers of 5 bases (with the N at 3) and of the last 3; none in row 3
    bases, cut_valid = element_bases(span[:, :12], ends, valid[:, :12], 0)
    assert cut_valid.tolist() == [[True] * 3 + [False, True], [True] * 3 + [False] * 2, [False] * 5]
    torch.testing.assert_close(bases[1, :3], span[1, 9:12])
    assert not bases[1, 3:].any() and not bases[2].any()
    empty_bases, empty_valid = element_bases(span[:2, :12], torch.full((2, 12), 2), valid[:2, :12], 1)
    assert empty_bases.shape == (2, 1, 4) and not empty_valid.any() and not empty_bases.any()


def test_each_element_is_pooled_from_its_fine_tokens_and_the_whole_from_the_coarse_ones():
    """With blocks that start as the identity the head reads, per element, the max over the element stem's tokens
    of the element window alone (plus the segment row, normalised), and over all, the coarse stem's tokens."""
    model = fine_element_model(element_patch=2)
    span, segment, valid = span_input(64, 5, 16, 48)  # enhancer 0-15, between 16-47, promoter 48-63
    seen = {}
    model.head.register_forward_pre_hook(lambda module, args: seen.update(head_in=args[0]))
    model(span=span, segment=segment, span_valid=valid)
    rows = model.segment.weight
    fine = []
    for index, (start, stop) in enumerate([(0, 16), (48, 64)]):
        window = span[:, start:stop]
        tokens, _ = model.element_tokenizer(window, torch.ones(window.shape[:2], dtype=torch.bool))
        assert tokens.shape[1] == 8  # 16 bases at 2 a token
        fine.append(model.norm(tokens * 4.0 + rows[index])[0])  # sqrt(d_model) = 4
        torch.testing.assert_close(seen["head_in"][0, 16 * (index + 1) : 16 * (index + 2)], fine[-1].amax(dim=0))
    # The pool of all tokens reads the coarse stem's tokens over the whole span, as without fine elements.
    coarse, _ = model.tokenizer(span, valid)
    token_rows = rows[[0, 0, 2, 2, 2, 2, 1, 1]]  # 8 bases a token: enhancer, between, promoter
    torch.testing.assert_close(seen["head_in"][0, :16], model.norm(coarse[0] * 4.0 + token_rows).amax(dim=0))


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_span_with_fine_elements_padded_in_a_batch_of_longer_spans_scores_as_alone(attention):
    model = fine_element_model(element_patch=4, attention=attention)
    for block in model.blocks:  # blocks that do something, so that attention across the padding would show
        for parameter in block.parameters():
            torch.nn.init.normal_(parameter, std=0.2)
    short, long = span_input(37, 1, 8, 29), span_input(64, 2, 12, 52)
    alone = model(span=short[0], segment=short[1], span_valid=short[2])
    padded = [
        torch.cat([torch.nn.functional.pad(s, (0, 0, 0, 27) if s.dim() == 3 else (0, 27)), other])
        for s, other in zip(short, long)
    ]
    padded[1][0, 37:] = 2  # padding is between-segment, as SpanBatches writes it
    together = model(span=padded[0], segment=padded[1], span_valid=padded[2])
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        together[1], model(span=long[0], segment=long[1], span_valid=long[2])[0], atol=1e-5, rtol=1e-5
    )


def test_element_patch_size_is_for_span_models_and_a_patch_their_stem_can_read():
    with pytest.raises(ValueError, match="needs input: span"):
        ModelConfig(element_patch_size=4)
    with pytest.raises(ValueError, match="element_patch_size 4: stem conv_tower .* not 4"):
        ModelConfig(input="span", stem="conv_tower", patch_size=128, element_pool=True, element_patch_size=4)
    with pytest.raises(ValueError, match=r"element_patch_size 4: kernel_size \(2\) must be >= patch_size \(4\)"):
        ModelConfig(input="span", patch_size=2, kernel_size=2, element_pool=True, element_patch_size=4)
    with pytest.raises(ValueError, match="0 \\(off\\) or more"):
        ModelConfig(input="span", element_pool=True, element_patch_size=-1)
    with pytest.raises(ValueError, match="needs element_pool: true"):
        ModelConfig(input="span", element_patch_size=4)
    assert EPITransformer(ModelConfig(input="span", d_model=16, n_heads=2)).element_tokenizer is None
