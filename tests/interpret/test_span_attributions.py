"""Attributions over a span model's whole span: integrated gradients add up, saliency is the gradient, segments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from epiformer.data.batches import SpanBatches
from epiformer.data.genome import Genome
from epiformer.data.spans import spans_of_windows
from epiformer.interpret.attributions import BASELINE, AttributionError
from epiformer.interpret.span_attributions import (
    SpanExplainSpec,
    attribute_spans,
    insulator_mask,
    segment_masks,
    segment_row,
)
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer
from tests.helpers import windows_frame


@pytest.fixture
def spans(small_fasta):
    """Three spans of chrA of small_fasta, both element orders, 60-330 bp (one with an N-free gap between)."""
    path, _ = small_fasta
    windows = windows_frame(
        [("chrA", 10, 30, "chrA", 50, 66), ("chrA", 300, 320, "chrA", 40, 56), ("chrA", 100, 120, "chrA", 400, 416)]
    )
    genome = Genome(path)
    return spans_of_windows(windows, genome, list(genome.sizes))


@pytest.fixture(params=["linear", "conv_exp"])
def span_model(request):
    torch.manual_seed(0)
    kernel = 8 if request.param == "linear" else 9
    config = ModelConfig(
        attention="linear", input="span", d_model=16, n_heads=2, d_ff=32, patch_size=4, kernel_size=kernel,
        stem=request.param, pool="max" if request.param != "linear" else "mean",
    )  # fmt: skip
    return EPITransformer(config).eval()


def one_span(spans, row: int) -> dict:
    batches = SpanBatches(spans, max_tokens=1, patch_size=4)
    index = [i for i, rows in enumerate(batches.batches) if rows[0] == row][0]
    return batches[index]


def test_integrated_gradients_over_a_span_add_up_to_the_logit_change_from_the_baseline(spans, span_model, monkeypatch):
    """Completeness, as for element windows; a tiny RECOMPUTE_TOKENS makes the path points go one at a time,
    recomputed in the backward pass, as a Mb span's would."""
    import epiformer.model.configs as configs
    import epiformer.model.transformer as transformer

    monkeypatch.setattr(configs, "RECOMPUTE_TOKENS", 40)
    monkeypatch.setattr(transformer, "RECOMPUTE_TOKENS", 40)
    per_base = attribute_spans(span_model, spans, "integrated_gradients", steps=100)
    for row in range(len(spans)):
        batch = one_span(spans, row)
        assert per_base[row].shape == (spans.distance[row],)
        with torch.no_grad():
            inputs = {"segment": batch["segment"], "span_valid": batch["span_valid"]}
            change = span_model(span=batch["span"], **inputs) - span_model(
                span=torch.full_like(batch["span"], BASELINE), **inputs
            )
        np.testing.assert_allclose(per_base[row].sum(), change.item(), rtol=0.02, atol=2e-3)


def test_saliency_over_a_span_is_the_centred_gradient_at_each_observed_base(spans, span_model):
    per_base = attribute_spans(span_model, spans, "saliency", steps=1)
    for row in range(len(spans)):
        batch = one_span(spans, row)
        span = batch["span"].clone().requires_grad_()
        span_model(span=span, segment=batch["segment"], span_valid=batch["span_valid"]).sum().backward()
        centred = span.grad[0] - span.grad[0].mean(-1, keepdim=True)
        np.testing.assert_allclose(per_base[row], (centred * batch["span"][0]).sum(-1).numpy(), atol=1e-6)
        assert np.abs(per_base[row][spans.segments[row, 0] : spans.segments[row, 1]]).sum() > 0  # between counts


def test_segment_shares_and_the_insulators_enrichment():
    masks = segment_masks(100, 20, 80, enhancer_first=False)  # promoter [0, 20), between, enhancer [80, 100)
    assert masks["promoter"][:20].all() and masks["enhancer"][80:].all() and masks["between"].sum() == 60
    contribution = np.full(100, 0.1)
    contribution[40:50] = -2.0  # the insulator: ten bases that matter twenty times as much
    truth = pd.DataFrame({"pair_id": [7], "insulator_start": [1040], "insulator_end": [1050]}).set_index("pair_id")
    insulator = insulator_mask(truth, 7, span_start=1000, length=100)
    row = segment_row(contribution, masks, insulator)
    assert row["enhancer_share"] + row["between_share"] + row["promoter_share"] == pytest.approx(1.0)
    assert row["insulator_share"] == pytest.approx(20 / (20 + 9))
    assert row["insulator_enrichment"] == pytest.approx(20.0)
    uninsulated = pd.DataFrame({"pair_id": [7], "insulator_start": ["."], "insulator_end": ["."]}).set_index("pair_id")
    assert insulator_mask(uninsulated, 7, 1000, 100) is None
    assert np.isnan(segment_row(contribution, masks, None)["insulator_enrichment"])


def test_span_settings_are_checked_with_the_key_named():
    with pytest.raises(AttributionError, match="explain.span_method is 'ism'"):
        SpanExplainSpec(span_method="ism")
