"""Read a cell line's pairs, place windows, assign splits, audit overlap across splits."""

import json
from pathlib import Path

from epiformer.genome import Genome
from epiformer.pairs import read_pairs
from epiformer.runlog import setup_logging
from epiformer.windows import SplitSpec, assign_splits, make_windows, split_audit

log = setup_logging(snakemake.log[0])
settings, split = snakemake.params.windows, snakemake.params.split
pairs = read_pairs(snakemake.input.pairs)
log.info("Read %d pairs (%s) from %s", len(pairs), pairs.attrs["format"], snakemake.input.pairs)
windows, report = make_windows(
    pairs,
    Genome(snakemake.input.genome).sizes,
    settings["enhancer_width"],
    settings["promoter_width"],
    settings["edge"],
    settings["allow_trans"],
)
spec = SplitSpec(**{**split, "val_chromosomes": tuple(split["val_chromosomes"]),
                    "test_chromosomes": tuple(split["test_chromosomes"])})  # fmt: skip
windows = assign_splits(windows, spec)
summary = report.as_dict(windows, spec.mode)
log.info("Windows: %s", json.dumps(summary))
if spec.mode == "random":
    log.warning("split.mode is random: pairs share elements across splits, so results are leak-prone.")
audit = split_audit(windows, temp_dir=str(Path(snakemake.output.audit).parent))
log.info("Split audit:\n%s", audit.to_string(index=False))
windows.to_csv(snakemake.output.windows, sep="\t", index=False)
audit.to_csv(snakemake.output.audit, sep="\t", index=False)
Path(snakemake.output.report).write_text(json.dumps(summary, indent=2))
