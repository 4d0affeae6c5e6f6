"""Encode a cell line's windows into bit-packed one-hot shards with a manifest."""

import json
from pathlib import Path

from epiformer.encode import encode_shards
from epiformer.fileio import read_windows, sha256_file
from epiformer.runlog import setup_logging

log = setup_logging(snakemake.log[0])
windows = read_windows(snakemake.input.windows)
manifest = encode_shards(
    windows,
    snakemake.input.genome,
    snakemake.output.shards,
    flank=snakemake.params.flank,
    shard_size=snakemake.params.shard_size,
    pairs_sha256=sha256_file(snakemake.input.pairs),
    windows_stats=json.loads(Path(snakemake.input.stats).read_text()),
    workers=snakemake.threads,
)
log.info("Wrote %d shards for %d pairs", len(manifest["shards"]), sum(s["rows"] for s in manifest["shards"]))
