"""The ensemble of a model's replicates: its model.json, from the replicates' own."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.training.replicates import write_ensemble_description

log = setup_logging(snakemake.log[0])
description = write_ensemble_description(Path(snakemake.output.description).parent, snakemake.params.replicates)
log.info("Ensemble of %d replicates (seeds %s)", len(description["replicates"]), description["seeds"])
