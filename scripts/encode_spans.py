"""Encode a cell line's spans (first element window to the second) into ragged shards with a manifest."""

import json
from pathlib import Path

from epiformer.fileio import read_windows, sha256_file
from epiformer.runlog import setup_logging
from epiformer.spans import encode_span_shards

log = setup_logging(snakemake.log[0])
manifest = encode_span_shards(
    read_windows(snakemake.input.windows),
    snakemake.input.genome,
    snakemake.output.shards,
    flank=snakemake.params.flank,
    shard_size=snakemake.params.shard_size,
    pairs_sha256=sha256_file(snakemake.input.pairs),
    windows_stats=json.loads(Path(snakemake.input.stats).read_text()),
    workers=snakemake.threads,
)
log.info(
    "Wrote %d span shards for %d pairs, %d bases",
    len(manifest["shards"]),
    sum(s["rows"] for s in manifest["shards"]),
    sum(s["bases"] for s in manifest["shards"]),
)
