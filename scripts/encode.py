"""Encode a cell line's windows (or spans) into bit-packed one-hot shards with a manifest."""

from epiformer.data.encode import encode_shards
from epiformer.data.spans import encode_span_shards
from epiformer.io.files import read_windows, sha256_file
from epiformer.io.runlog import setup_logging
from epiformer.io.windows_stats import read_windows_stats

# Each element's window, cut from the FASTA; or one span a pair, cut from the genome store when batches are made.
ENCODERS = {"windows": encode_shards, "span": encode_span_shards}
SOURCES = {"windows": "genome", "span": "genome_store"}

log = setup_logging(snakemake.log[0])
manifest = ENCODERS[snakemake.params.kind](
    read_windows(snakemake.input.windows),
    snakemake.input[SOURCES[snakemake.params.kind]],
    snakemake.output.shards,
    flank=snakemake.params.flank,
    shard_size=snakemake.params.shard_size,
    pairs_sha256=sha256_file(snakemake.input.pairs),
    windows_stats=read_windows_stats(snakemake.input.stats),
    workers=snakemake.threads,
)
log.info(
    "Wrote %d %s shards for %d pairs",
    len(manifest["shards"]),
    snakemake.params.kind,
    sum(s["rows"] for s in manifest["shards"]),
)
