"""Span input: one sequence per pair, from the first element window to the second, in ragged shards.

The workflow writes them for models that read spans (`input: span`, docs/outputs.md), beside the
fixed-width window shards of `epiformer.data.encode`, which element models read.

Span coordinates (`span_coordinates`), 0-based, half-open, on the + strand. The two element
windows of a pair (windows.tsv, both on one chromosome) are taken in genome order: the first
element is the one whose window starts first (ties: the one that ends first, then the
enhancer). The span runs from the first window's start to the furthest window end, and
everything between is included. Every base of the span belongs to exactly one segment, cut
at two offsets within the span, `first_end` <= `second_start`:

- `[0, first_end)`: the first element; `[first_end, second_start)`: between (may be empty);
  `[second_start, length)`: the second element.
- Apart: `first_end` is where the first window ends and `second_start` where the second
  starts. Touching windows (second starts where the first ends): the between segment is empty.
- Overlapping windows: no between segment; the overlap `[s, e)` (the second window's start to
  the nearer window end) is cut at `m = (s + e) // 2`, so the first element keeps the first
  floor(n/2) of its n bases and the second the rest (`first_end == second_start == m`). When
  one window contains the other the second segment runs on to the span's end.

The span's `distance` is its length in bases (not windows.tsv's centre-to-centre distance).

N runs (assembly gaps, soft-masked repeats cleaned to N, bases past a chromosome end) are kept
as all-zero one-hot rows, as in the window shards, so positions along the span and its
length stay true. Each pair records how many between-segment bases are N (`between_n`), so
spans that are mostly gap can be dropped or down-weighted later without re-reading the genome.

Span shards hold coordinates, not sequence: a pair's bases are cut from the genome store
(`epiformer.data.genome_store`, each base of the genome once, 4 bits a base) when its batch is
made. Spans at real distances (25 kb to 2 Mb) overlap so much that storing each apart would
hold the genome 25 times over; stored once, the sequence of every cell line's spans is the
genome's half a byte a base, and a span shard is 66 bytes a pair.

Stored layout (`{split}/shard-NNNNN.safetensors`, at most `shard_size` pairs, N rows):

- `chrom`: int64 [N], the pair's chromosome: its position among the genome store's sequences
  (the store manifest's `sequences`, the FASTA index's order).
- `span_start`: int64 [N], the span's first base on the chromosome. The pair's stored
  sequence is `[span_start - flank, span_end + flank)` (bases past a chromosome end are N).
- `lengths`: int64 [N], stored bases of each pair (span length + 2 * flank).
- `segments`: int64 [N, 2], (`first_end`, `second_start`) in span coordinates; add `flank`
  for positions in the stored sequence.
- `enhancer_first`: uint8 [N], 1 when the enhancer is the first element in genome order.
- `between_n`: int64 [N], N bases in the between segment.
- `label`: uint8 [N]; `pair_id`: int64 [N]; `distance`: int64 [N], the span length.

They are read back by `epiformer.data.shards.SpanShardSet` (with `load_split`, which tells the two
kinds apart). `manifest.json` is written last, atomically, like the window shards': `format_version`
(`SPAN_SHARD_FORMAT`) with `kind: "span"`, `genome_store` (`path`, the store's folder relative to the
shard folder, and `manifest_sha256`, its manifest's checksum: a store rebuilt from another genome
is refused), `windows` (the window spec, with the `max_span` that kept these pairs),
`flank`, `channels`, `packing`, `split`, every shard's path, split, rows, positives, bases
(sum of `lengths`) and SHA-256, and the inputs' checksums.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer import __version__
from epiformer.constants import ALPHABET, SPAN_INPUT, SPAN_SHARD_FORMAT
from epiformer.data.encode import (
    ShardJob,
    split_record,
    window_spec_of,
    write_shard,
    write_shard_folder,
)
from epiformer.data.genome_store import GenomeStore, read_store_manifest, store_manifest_sha256
from epiformer.data.shards import Spans, write_manifest

SPAN_COLUMNS = ["pair_id", "chrom", "span_start", "span_end", "first_end", "second_start", "enhancer_first", "distance"]


def span_coordinates(windows: pd.DataFrame) -> pd.DataFrame:
    """Per pair of a windows table: `chrom`, `span_start`, `span_end` (genome coordinates), the segment
    boundaries `first_end` <= `second_start` (offsets within the span), `enhancer_first` and
    `distance` (the span length); rules in the module docstring. Pairs across chromosomes raise."""
    trans = windows["enhancer_chrom"].astype(str) != windows["promoter_chrom"].astype(str)
    if trans.any():
        shown = windows.loc[trans, ["pair_id", "enhancer_chrom", "promoter_chrom"]].head(5).to_records(index=False)
        raise ValueError(
            f"{int(trans.sum())} pairs have their elements on two chromosomes (pair_id, enhancer, promoter: "
            f"{', '.join(f'{p} {e} {c}' for p, e, c in shown)}); a span runs along one chromosome. "
            "Drop pairs across chromosomes from the windows table before encoding spans."
        )
    es, ee = windows["enhancer_start"].to_numpy(np.int64), windows["enhancer_end"].to_numpy(np.int64)
    ps, pe = windows["promoter_start"].to_numpy(np.int64), windows["promoter_end"].to_numpy(np.int64)
    enhancer_first = (es < ps) | ((es == ps) & (ee <= pe))
    first_start, first_end = np.where(enhancer_first, es, ps), np.where(enhancer_first, ee, pe)
    second_start, second_end = np.where(enhancer_first, ps, es), np.where(enhancer_first, pe, ee)
    span_end = np.maximum(first_end, second_end)
    overlapping = second_start < first_end
    cut = (second_start + np.minimum(first_end, second_end)) // 2  # midpoint of the overlap
    return pd.DataFrame(
        {
            "pair_id": windows["pair_id"].to_numpy(np.int64),
            "chrom": windows["enhancer_chrom"].astype(str).to_numpy(),
            "span_start": first_start,
            "span_end": span_end,
            "first_end": np.where(overlapping, cut, first_end) - first_start,
            "second_start": np.where(overlapping, cut, second_start) - first_start,
            "enhancer_first": enhancer_first,
            "distance": span_end - first_start,
        },
        columns=SPAN_COLUMNS,
    )


def encode_span_shard(store: GenomeStore, job: ShardJob, outdir: Path, flank: int) -> dict:
    """Write one span shard (layout in the module docstring) of `job`'s pairs; returns its manifest entry."""
    spans = span_coordinates(job.windows)
    chrom_index = {name: index for index, name in enumerate(store.sizes)}
    unknown = [f"{chrom}" for chrom in spans["chrom"].unique() if chrom not in chrom_index]
    if unknown:
        raise ValueError(
            f"Chromosomes {', '.join(unknown[:5])} of the windows table are not in the genome store {store.folder}: "
            "the store was built from another genome. Re-run the genome_store step for this cell line's genome."
        )
    between_n = [
        store.unknown_bases(chrom, start + first_end, start + second_start)
        for chrom, start, first_end, second_start in spans[
            ["chrom", "span_start", "first_end", "second_start"]
        ].itertuples(index=False)
    ]
    tensors = {
        "chrom": spans["chrom"].map(chrom_index).to_numpy(np.int64),
        "span_start": spans["span_start"].to_numpy(np.int64),
        "lengths": spans["distance"].to_numpy(np.int64) + 2 * flank,
        "segments": np.ascontiguousarray(spans[["first_end", "second_start"]].to_numpy(np.int64)),  # C order:
        # a DataFrame gives a Fortran-ordered array, whose raw bytes safetensors would store transposed
        "enhancer_first": spans["enhancer_first"].to_numpy(np.uint8),
        "between_n": np.asarray(between_n, dtype=np.int64),
        "label": job.windows["label"].to_numpy(dtype=np.uint8),
        "pair_id": job.windows["pair_id"].to_numpy(dtype=np.int64),
        "distance": spans["distance"].to_numpy(np.int64),
    }
    digest = write_shard(outdir / job.relative, tensors)
    return {
        "path": job.relative,
        "split": job.split,
        "rows": len(job.windows),
        "positives": int(tensors["label"].sum()),
        "bases": int(tensors["lengths"].sum()),
        "sha256": digest,
    }


def encode_span_shards(
    windows: pd.DataFrame,
    genome_store: str | Path,
    outdir: str | Path,
    flank: int,
    shard_size: int,
    pairs_sha256: str = "",
    windows_stats: dict | None = None,
    workers: int = 1,
) -> dict:
    """Write every split's span shards and `manifest.json` under `outdir`; returns the manifest.

    Sequence comes from the genome store at `genome_store` (`encode_genome.build_store` of the
    windows' genome). The same contract as `encode.encode_shards`: a re-run first clears what an
    interrupted run left, the manifest is written last, and the bytes do not depend on `workers`.
    """
    span_coordinates(windows)  # pairs across chromosomes fail here, before any shard is written
    outdir = Path(outdir)
    store = read_store_manifest(genome_store)  # a missing or foreign store fails before any shard is written
    entries = write_shard_folder(
        encode_span_shard, windows, GenomeStore, genome_store, outdir, flank, shard_size, workers
    )
    stats = windows_stats or {}
    manifest = {
        "format_version": SPAN_SHARD_FORMAT,
        "kind": SPAN_INPUT,
        "epiformer_version": __version__,
        "channels": ALPHABET,
        "packing": "coordinates only: pair i's sequence is the genome store's bases [span_start - flank, "
        "span_end + flank) of sequence `chrom`, packed as the store packs them",
        "genome_store": {
            "path": os.path.relpath(Path(genome_store).resolve(), outdir.resolve()),
            "manifest_sha256": store_manifest_sha256(genome_store),
        },
        "windows": window_spec_of(windows, stats.get("windows")),
        "flank": flank,
        "split": split_record(windows_stats),
        "shards": entries,
        "inputs": {"pairs_sha256": pairs_sha256, "genome_index_sha256": store["genome"]["index_sha256"]},
    }
    return write_manifest(outdir, manifest)


def spans_of_windows(windows, source, chrom_names, flank: int = 0) -> Spans:
    """The spans of a windows table (`data.spans.span_coordinates`) over `source`, for scoring: labels 0 when absent."""
    spans = span_coordinates(windows)
    index = {name: position for position, name in enumerate(chrom_names)}
    label = windows["label"].to_numpy() if "label" in windows else np.zeros(len(windows), dtype=np.uint8)
    return Spans(
        source,
        chrom_names,
        spans["chrom"].map(index).to_numpy(np.int64),
        spans["span_start"].to_numpy(),
        spans["distance"].to_numpy(np.int64) + 2 * flank,
        spans[["first_end", "second_start"]].to_numpy(),
        spans["enhancer_first"].to_numpy(),
        label,
        spans["pair_id"].to_numpy(),
        flank,
    )
