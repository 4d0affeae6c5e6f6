"""Generate the built-in synthetic demo (genome, pair tables, truth tables)."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.synthetic.demo import DemoSpec, generate_demo

log = setup_logging(snakemake.log[0])
spec = DemoSpec(**snakemake.params.spec)
paths = generate_demo(Path(snakemake.output.genome).parent, spec)
log.info("Demo written with %s: %s", spec, ", ".join(str(p) for p in paths.values()))
