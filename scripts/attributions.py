"""Attributions of a model's best-scored test pairs (the explain target): safetensors, bigWig, agreement with ISM."""

from pathlib import Path

import torch

from epiformer.interpret.attributions import ExplainSpec, explain_model
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core of the node
agreement = explain_model(
    Path(snakemake.input.description).parent,
    snakemake.input.windows,
    snakemake.input.predictions,
    snakemake.input.genome,
    snakemake.output.attributions,
    snakemake.output.bigwig,
    snakemake.output.agreement,
    ExplainSpec(**snakemake.params.spec),
)
log.info("Agreement with in-silico mutagenesis: %s", agreement)
