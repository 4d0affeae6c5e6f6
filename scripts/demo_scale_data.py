"""Generate the demo at real distances (genome, pair table, truth table, the ceilings)."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.synthetic.demo_scale import ScaleDemoSpec, generate_scale_demo

log = setup_logging(snakemake.log[0])
spec = ScaleDemoSpec(**snakemake.params.spec)
paths = generate_scale_demo(Path(snakemake.output.genome).parent, spec)
log.info("Scale demo written with %s: %s", spec, ", ".join(str(p) for p in paths.values()))
