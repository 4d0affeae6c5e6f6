"""The ensemble of a model's replicates: its model.json, from the replicates' own."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.training.replicates import write_ensemble_description

log = setup_logging(snakemake.log[0])
folder = Path(snakemake.output.description).parent
names = [Path(path).parent.relative_to(folder).as_posix() for path in snakemake.input.descriptions]
description = write_ensemble_description(folder, names)
log.info("Ensemble of %d replicates (seeds %s)", len(description["replicates"]), description["seeds"])
