"""Attributions of a span model: which bases of a pair's whole span drive its score, between the elements included.

A span model reads everything from the first element window to the second (`data.spans`), so
its attributions cover the span: each base's contribution to the pair's *logit*, as for
element models (`interpret.attributions`: hypothetical contributions, centred over the four
channels, and the contribution of the base that is there). In-silico mutagenesis needs three
model passes a base, 150,000 for a 50 kb span, so span models are explained by a gradient
method (`explain.span_method`): `integrated_gradients` (the logit's gradient averaged along
the path from the uniform base, 0.25 each, to the sequence; `steps` points) or `saliency`
(the gradient at the sequence). Each pair is attributed on its own, its path points batched
within `RECOMPUTE_TOKENS` model tokens; a span longer than that recomputes its activations
in the backward pass, as training does, so memory stays bounded at any span length.

Outputs of `explain_span_model` (`results/{cell}/{model}/`, the `span_attributions` rule):

- `span_attributions.safetensors`: `contribution` float16 [total bases], every pair's
  per-base contributions concatenated (pair i at `offsets[i]:offsets[i + 1]`), `offsets`
  int64 [N + 1], `pair_id`, `span_start`, `segments` [N, 2] (`first_end`, `second_start` in
  span coordinates), `enhancer_first`; metadata: method, steps, and the chromosome of each pair.
- `attributions.bw`: the contributions in genome coordinates (mean where spans overlap).
- `span_segments.tsv` (SEGMENT_COLUMNS): per pair, the share of its summed absolute
  contribution in each segment (enhancer, between, promoter) and each segment's mean absolute
  contribution a base. With a truth table that places insulators (the long demo's
  `insulator_start`, `insulator_end`), also the insulator's share and its `insulator_enrichment`:
  the mean absolute contribution a base inside the insulator over that of the rest of the
  between segment (above 1: the insulator stands out).
- `span_attributions.png`: the contribution along the span of six of the pairs, from the best
  scored down, segments shaded and a known insulator marked.

Pairs: `explain.span_pairs` test pairs spread evenly down the score ranking (`spread_over_scores`),
not only the best-scored: between the elements, what makes a pair score low (an insulator)
is as much the question as what makes one score high.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from epiformer.constants import SCORE_FORMAT, SEGMENT_IDS
from epiformer.interpret.attributions import BASELINE, AttributionError, centred, choose_pairs
from epiformer.io.files import atomic_write, atomic_write_text
from epiformer.io.model_description import reads_spans
from epiformer.io.predictions import read_predictions
from epiformer.io.runlog import progress

log = logging.getLogger(__name__)
SPAN_METHODS = ("integrated_gradients", "saliency")
SEGMENT_COLUMNS = [
    "pair_id",
    "label",
    "score",
    "span_length",
    "enhancer_share",
    "between_share",
    "promoter_share",
    "enhancer_mean_abs",
    "between_mean_abs",
    "promoter_mean_abs",
    "insulator_share",
    "insulator_enrichment",
]
PLOTTED_PAIRS = 6  # pairs drawn in span_attributions.png
ELEMENT_COLOURS = {"enhancer": "tab:green", "promoter": "tab:purple"}


@dataclass(frozen=True)
class SpanExplainSpec:
    """What explaining a span model takes from the `explain:` config block (config/config.yaml documents each key)."""

    span_pairs: int = 40  # test pairs explained, spread evenly down the score ranking (0: every test pair)
    span_method: str = "integrated_gradients"  # or saliency
    steps: int = 32  # integrated gradients: points along the path

    def __post_init__(self):
        if self.span_method not in SPAN_METHODS:
            raise AttributionError(
                f"explain.span_method is {self.span_method!r}; use one of {', '.join(SPAN_METHODS)} "
                "(in-silico mutagenesis needs three model passes a base of the span)."
            )
        if self.span_pairs < 0 or self.steps < 1:
            raise AttributionError("explain.span_pairs must be 0 or more and explain.steps 1 or more.")


def spread_over_scores(ranked: pd.DataFrame, n: int) -> pd.DataFrame:
    """`n` rows of `ranked` (test pairs, best score first) at even steps down the ranking, the best first (all when 0
    or fewer than n): pairs the model calls interacting, blocked and background alike, since what lies between
    the elements matters as much for a pair it scores low."""
    if n == 0 or n >= len(ranked):
        return ranked
    return ranked.iloc[np.linspace(0, len(ranked) - 1, n).round().astype(int)]


def span_hypothetical(model, batch: dict, method: str, steps: int) -> torch.Tensor:
    """Hypothetical contributions [L, 4] of the one span in `batch` (a `SpanBatches` item) to its logit."""
    from captum.attr import IntegratedGradients, Saliency

    from epiformer.model.configs import RECOMPUTE_TOKENS

    span, segment, valid = batch["span"], batch["segment"], batch["span_valid"]

    def logits(span_input, segment_input, valid_input):
        return model(span=span_input, segment=segment_input, span_valid=valid_input)

    if method == "saliency":
        gradient = Saliency(logits).attribute(
            span.requires_grad_(), additional_forward_args=(segment, valid), abs=False
        )
    else:
        tokens = -(-span.shape[1] // model.config.patch_size)
        gradient = IntegratedGradients(logits, multiply_by_inputs=False).attribute(
            span,
            baselines=torch.full_like(span, BASELINE),
            additional_forward_args=(segment, valid),
            n_steps=steps,
            internal_batch_size=max(1, RECOMPUTE_TOKENS // tokens),
        )
    return centred(gradient.detach()[0])


def attribute_spans(model, spans, method: str, steps: int) -> dict[int, np.ndarray]:
    """Per-base contributions float32 [span length] of every pair of `spans` (a `data.shards.Spans`), by row."""
    from epiformer.data.batches import SpanBatches

    model.eval()
    batches = SpanBatches(spans, max_tokens=1, patch_size=model.config.patch_size)  # one span a batch
    found = {}
    for index in progress(range(len(batches)), len(batches), f"{method.replace('_', ' ')} over spans"):
        batch = batches[index]
        hypothetical = span_hypothetical(model, batch, method, steps)
        observed = batch["span"][0].detach()
        found[int(batches.batches[index][0])] = (hypothetical * observed).sum(dim=-1).detach().numpy()
    return found


def segment_masks(length: int, first_end: int, second_start: int, enhancer_first: bool) -> dict[str, np.ndarray]:
    """Boolean [length] masks of the enhancer, between and promoter segments of a span."""
    from epiformer.data.shards import segment_ids

    ids = segment_ids(np.arange(length), first_end, second_start, enhancer_first)
    return {name: ids == SEGMENT_IDS[name] for name in ("enhancer", "between", "promoter")}


def segment_row(contribution: np.ndarray, masks: dict[str, np.ndarray], insulator: np.ndarray | None) -> dict:
    """Shares of summed |contribution| and mean |contribution| a base, per segment (and the insulator's, if known)."""
    magnitude = np.abs(contribution.astype(np.float64))
    total = magnitude.sum() or 1.0
    row = {}
    for name, mask in masks.items():
        row[f"{name}_share"] = magnitude[mask].sum() / total
        row[f"{name}_mean_abs"] = magnitude[mask].mean() if mask.any() else np.nan
    row["insulator_share"] = row["insulator_enrichment"] = np.nan
    if insulator is not None and insulator.any():
        rest = masks["between"] & ~insulator
        row["insulator_share"] = magnitude[insulator].sum() / total
        if rest.any() and magnitude[rest].mean() > 0:
            row["insulator_enrichment"] = magnitude[insulator].mean() / magnitude[rest].mean()
    return row


def insulator_mask(truth: pd.DataFrame | None, pair_id: int, span_start: int, length: int) -> np.ndarray | None:
    """Boolean [length]: the span's bases inside the pair's insulator (from a truth table); None when none is known."""
    if truth is None or "insulator_start" not in truth or pair_id not in truth.index:
        return None
    start, end = truth.loc[pair_id, ["insulator_start", "insulator_end"]]
    if pd.isna(start) or str(start) in (".", ""):
        return None
    position = span_start + np.arange(length)
    return (position >= int(start)) & (position < int(end))


def contribution_signal_of_spans(spans, rows: list[int], per_base: dict[int, np.ndarray]) -> dict[str, tuple]:
    """Per chromosome, (starts, values) of the spans' per-base contributions (mean where spans overlap)."""
    from epiformer.io.bigwig import mean_per_base

    by_chrom: dict[str, tuple[list, list]] = {}
    for row in rows:
        starts, arrays = by_chrom.setdefault(spans.chrom_names[int(spans.chrom[row])], ([], []))
        starts.append(int(spans.span_start[row]))
        arrays.append(per_base[row])
    return {chrom: mean_per_base(starts, arrays) for chrom, (starts, arrays) in by_chrom.items()}


def write_span_attributions(path, spans, rows: list[int], per_base: dict[int, np.ndarray], metadata: dict) -> None:
    """The contributions of the explained pairs, ragged, in one safetensors file (module docstring)."""
    from safetensors.numpy import save_file

    values = [per_base[row] for row in rows]
    tensors = {
        "contribution": np.concatenate(values).astype(np.float16) if values else np.zeros(0, np.float16),
        "offsets": np.cumsum([0] + [len(v) for v in values]).astype(np.int64),
        "pair_id": spans.pair_id[rows].astype(np.int64),
        "span_start": spans.span_start[rows].astype(np.int64),
        "segments": np.ascontiguousarray(spans.segments[rows], dtype=np.int64),
        "enhancer_first": spans.enhancer_first[rows].astype(np.uint8),
    }
    chroms = [spans.chrom_names[int(c)] for c in spans.chrom[rows]]
    text = {key: json.dumps(value) for key, value in {**metadata, "chrom": chroms}.items()}
    atomic_write(Path(path), lambda temporary: save_file(tensors, str(temporary), metadata=text))


def plot_span_contributions(path, spans, rows, per_base, table: pd.DataFrame, truth) -> None:
    """span_attributions.png: the contribution along the span, binned, segments shaded, of PLOTTED_PAIRS pairs
    spread down the ranking."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [rows[i] for i in np.linspace(0, len(rows) - 1, min(PLOTTED_PAIRS, len(rows))).round().astype(int)]
    figure, axes = plt.subplots(max(1, len(shown)), 1, figsize=(10, 1.9 * max(1, len(shown))), squeeze=False)
    for axis, row in zip(axes[:, 0], shown):
        contribution = per_base[row]
        bins = max(1, len(contribution) // 400)  # about 400 points a span, each the bin's summed contribution
        binned = np.add.reduceat(contribution, np.arange(0, len(contribution), bins))
        position = np.arange(0, len(contribution), bins) / 1000
        first_end, second_start = spans.segments[row]
        first, second = ("enhancer", "promoter") if spans.enhancer_first[row] else ("promoter", "enhancer")
        for (start, end), element in (((0, first_end), first), ((second_start, len(contribution)), second)):
            axis.axvspan(start / 1000, end / 1000, color=ELEMENT_COLOURS[element], alpha=0.15, label=element)
        mask = insulator_mask(truth, int(spans.pair_id[row]), int(spans.span_start[row]), len(contribution))
        if mask is not None and mask.any():
            inside = np.flatnonzero(mask)
            axis.axvspan(inside[0] / 1000, (inside[-1] + 1) / 1000, color="tab:red", alpha=0.35, label="insulator")
        axis.plot(position, binned, color="black", linewidth=0.8)
        pair = int(spans.pair_id[row])
        axis.set_title(
            f"pair {pair}: score {table.loc[pair, 'score']:.3f}, label {int(table.loc[pair, 'label'])}", fontsize=9
        )
        axis.set_ylabel("contribution", fontsize=8)
        axis.legend(fontsize=7, loc="upper right", ncol=3)
    axes[-1, 0].set_xlabel("position in the span (kb)")
    figure.tight_layout()
    atomic_write(Path(path), lambda temporary: figure.savefig(temporary, format="png", dpi=110))
    plt.close(figure)


def explain_span_model(
    model_dir,
    windows_path,
    predictions_path,
    genome_path,
    out_dir,
    spec: SpanExplainSpec = SpanExplainSpec(),
    truth_path=None,
) -> pd.DataFrame:
    """Attributions over the spans of test pairs spread down a span model's ranking; the module docstring's outputs."""
    from epiformer.data.genome import Genome
    from epiformer.data.spans import spans_of_windows
    from epiformer.inference.trained_model import load_trained_model
    from epiformer.io.bigwig import write_bigwig
    from epiformer.io.files import read_windows

    out_dir = Path(out_dir)
    model, description = load_trained_model(model_dir)
    if not reads_spans(description):
        raise AttributionError(f"{model_dir} reads element windows: explain it with the attributions rule.")
    ranked = choose_pairs(read_windows(windows_path), read_predictions(predictions_path), top_pairs=0)
    pairs = spread_over_scores(ranked, spec.span_pairs)
    truth = pd.read_csv(truth_path, sep="\t").set_index("pair_id") if truth_path else None
    log.info("Explaining the spans of %d test pairs of %s by %s", len(pairs), model_dir, spec.span_method)
    with Genome(genome_path) as genome:
        spans = spans_of_windows(pairs, genome, list(genome.sizes))
        per_base = attribute_spans(model, spans, spec.span_method, spec.steps)
        sizes = genome.sizes
    rows = list(range(len(pairs)))  # best-scored first
    table = pairs.set_index("pair_id")[["label", "score"]]
    records = []
    for row in rows:
        length = len(per_base[row])
        first_end, second_start = spans.segments[row]
        masks = segment_masks(length, first_end, second_start, bool(spans.enhancer_first[row]))
        pair = int(spans.pair_id[row])
        insulator = insulator_mask(truth, pair, int(spans.span_start[row]), length)
        records.append(
            {"pair_id": pair, "label": int(table.loc[pair, "label"]), "score": table.loc[pair, "score"],
             "span_length": length, **segment_row(per_base[row], masks, insulator)}
        )  # fmt: skip
    segments = pd.DataFrame(records, columns=SEGMENT_COLUMNS)
    metadata = {"method": spec.span_method, "steps": spec.steps, "model": str(model_dir)}
    write_span_attributions(out_dir / "span_attributions.safetensors", spans, rows, per_base, metadata)
    write_bigwig(out_dir / "attributions.bw", sizes, contribution_signal_of_spans(spans, rows, per_base))
    # Exactly (SCORE_FORMAT): each pair's score is the one in predictions.tsv.
    atomic_write_text(out_dir / "span_segments.tsv", segments.to_csv(sep="\t", index=False, float_format=SCORE_FORMAT))
    plot_span_contributions(out_dir / "span_attributions.png", spans, rows, per_base, table, truth)
    return segments
