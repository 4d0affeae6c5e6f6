"""Encode a cell line's windows into bit-packed one-hot shards with a manifest."""

import json
from pathlib import Path

import pandas as pd

from epiformer.encode import encode_shards
from epiformer.fileio import sha256_file
from epiformer.runlog import setup_logging

log = setup_logging(snakemake.log[0])
windows = pd.read_csv(snakemake.input.windows, sep="\t", dtype={"enhancer_chrom": str, "promoter_chrom": str})
manifest = encode_shards(
    windows,
    snakemake.input.genome,
    snakemake.output.shards,
    flank=snakemake.params.flank,
    shard_size=snakemake.params.shard_size,
    pairs_sha256=sha256_file(snakemake.input.pairs),
    split_report=json.loads(Path(snakemake.input.report).read_text()),
    workers=snakemake.threads,
)
log.info("Wrote %d shards for %d pairs", len(manifest["shards"]), sum(s["rows"] for s in manifest["shards"]))
