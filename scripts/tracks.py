"""Write a model's or baseline's test-split predictions as BEDPE and UCSC interact browser tracks."""

from epiformer.io.runlog import setup_logging
from epiformer.scoring.tracks import write_tracks

setup_logging(snakemake.log[0])
write_tracks(
    snakemake.input.pairs,
    snakemake.input.predictions,
    snakemake.output.bedpe,
    snakemake.output.interact,
    track_name=snakemake.params.track_name,
)
