"""Generate the insulated long-range demo (genome, pair table, truth table, element-only ceiling)."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.synthetic.demo_long import LongDemoSpec, generate_long_demo

log = setup_logging(snakemake.log[0])
spec = LongDemoSpec(**snakemake.params.spec)
paths = generate_long_demo(Path(snakemake.output.genome).parent, spec)
log.info("Long demo written with %s: %s", spec, ", ".join(str(p) for p in paths.values()))
