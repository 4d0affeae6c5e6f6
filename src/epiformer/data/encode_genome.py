"""Encoding a genome FASTA into a genome store: each base one-hot packed once (layout in `data.genome_store`).

Apart from the reader, so that what reads a store (span shards, training, scoring) needs no
FASTA library: only building reads the FASTA.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from epiformer import __version__
from epiformer.constants import GENOME_STORE, GENOME_STORE_FORMAT
from epiformer.data.genome import Genome
from epiformer.data.genome_store import block_checksums, write_store_manifest
from epiformer.sequence.onehot import pack_codes

PACKING = "one-hot A,C,G,T (N all zeros), numpy.packbits bitorder=big: 4 bits a base, 2 bases a byte"
# 16 Mb a block: 8 MB read and packed at a time while building, ~190 checksums for hg19.
BLOCK_BASES = 1 << 24


def store_file(index: int) -> str:
    """The packed file of the index-th sequence: named by position, so any FASTA name works."""
    return f"chrom-{index:05d}.u8"


def _write_sequence(genome: Genome, name: str, length: int, path: Path, block_bases: int) -> None:
    """Pack `name`'s bases into `path`, one block at a time (memory: a block's bases, not the chromosome's)."""
    with open(path, "wb") as handle:
        for start in range(0, length, block_bases):
            end = min(start + block_bases, length)
            # fetch_many pads with N past the end; an odd tail's padding base packs to a zero nibble.
            codes = genome.fetch_many([name], [start], [start + (end - start + 1) // 2 * 2])
            handle.write(pack_codes(codes)[0].tobytes())


def build_store(fasta: str | Path, folder: str | Path, block_bases: int = BLOCK_BASES, progress=None) -> dict:
    """Encode every sequence of `fasta` into a store at `folder` (module docstring); returns its manifest.

    `progress(done_bases, total_bases)`, when given, is called after each sequence.
    """
    if block_bases <= 0 or block_bases % 2:
        raise ValueError(f"block_bases must be a positive even number, got {block_bases}")
    folder = Path(folder)
    partial = folder.with_name(f"{folder.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # what a killed build left
    partial.mkdir(parents=True)
    with Genome(fasta) as genome:
        total, done = sum(genome.sizes.values()), 0
        sequences = []
        for index, (name, length) in enumerate(genome.sizes.items()):
            path = partial / store_file(index)
            _write_sequence(genome, name, length, path, block_bases)
            sequences.append(
                {
                    "name": name,
                    "length": length,
                    "file": path.name,
                    "bytes": path.stat().st_size,
                    "blocks": block_checksums(path, block_bases),
                }
            )
            done += length
            if progress is not None:
                progress(done, total)
        manifest = {
            "format_version": GENOME_STORE_FORMAT,
            "kind": GENOME_STORE,
            "packing": PACKING,
            "block_bases": block_bases,
            "bases": total,
            "bytes": sum(sequence["bytes"] for sequence in sequences),
            "sequences": sequences,
            "genome": {"path": Path(fasta).name, "index_sha256": genome.index_sha256()},
            "epiformer_version": __version__,
        }
    write_store_manifest(partial, manifest)
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(partial, folder)
    return manifest
