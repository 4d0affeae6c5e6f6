"""Attributions over the whole span of a span model's best-scored test pairs (the explain target)."""

from pathlib import Path

import torch

from epiformer.interpret.span_attributions import SpanExplainSpec, explain_span_model
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core of the node
segments = explain_span_model(
    Path(snakemake.input.description).parent,
    snakemake.input.windows,
    snakemake.input.predictions,
    snakemake.input.genome,
    Path(snakemake.output.segments).parent,
    SpanExplainSpec(**snakemake.params.spec),
    truth_path=snakemake.input.truth or None,
)
log.info("Share of |contribution| by segment (median over pairs):\n%s", segments.median(numeric_only=True).to_string())
