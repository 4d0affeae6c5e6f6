"""One-hot encoding of windows into bit-packed safetensors shards.

Stored layout (the one place it is defined; `epiformer.data` reads it back):
`results/{cell}/shards/{split}/shard-NNNNN.safetensors` with at most `shard_size` pairs:

- `enhancer`, `promoter`: uint8 [N, L/2]. For each pair, the one-hot [L, 4] matrix
  (channels A, C, G, T; N is all zeros) flattened row-major to 4*L bits and packed with
  `numpy.packbits(..., bitorder="big")`. L = window width + 2 * flank; the flank bases on
  each side let training shift windows without re-reading the genome; bases past a
  chromosome end are N. Sequence is the reference + strand.
- `label`: uint8 [N]; `pair_id`: int64 [N].

`manifest.json` lists format version, widths, flank, channel order, packing, every shard
with its row and label counts and SHA-256, and the checksums of the inputs. Every file is
written to a temporary name and renamed, so a killed job leaves nothing that looks done.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors.numpy import save_file

from epiformer import __version__
from epiformer.fileio import atomic_write, atomic_write_bytes, sha256_file
from epiformer.genome import Genome

FORMAT_VERSION = 1
CHANNELS = "ACGT"
ONE_HOT_TABLE = np.zeros((256, 4), dtype=np.uint8)
for _channel, _base in enumerate(CHANNELS):
    ONE_HOT_TABLE[ord(_base), _channel] = 1
    ONE_HOT_TABLE[ord(_base.lower()), _channel] = 1


def one_hot(sequences: list[bytes] | np.ndarray) -> np.ndarray:
    """uint8 [N, L, 4] one-hot of equal-length ASCII sequences (or uint8 [N, L] codes), by table lookup."""
    if isinstance(sequences, np.ndarray):
        return ONE_HOT_TABLE[sequences]
    codes = np.frombuffer(b"".join(sequences), dtype=np.uint8).reshape(len(sequences), -1)
    return ONE_HOT_TABLE[codes]


def pack_one_hot(onehot: np.ndarray) -> np.ndarray:
    """uint8 [N, L, 4] one-hot -> uint8 [N, L/2] bit-packed (row-major, big bit order)."""
    return np.packbits(onehot.reshape(len(onehot), -1), axis=1, bitorder="big")


def encode_element(genome: Genome, chroms, starts, ends, flank: int) -> np.ndarray:
    """uint8 [N, (W + 2 * flank) / 2]: the packed one-hot of each window plus its flanks."""
    codes = genome.fetch_many(list(chroms), np.asarray(starts) - flank, np.asarray(ends) + flank)
    return pack_one_hot(one_hot(codes))


def write_shard(path: Path, tensors: dict[str, np.ndarray]) -> str:
    """Write one shard atomically; returns its SHA-256."""
    digests = []

    def write(temporary: Path) -> None:
        save_file(tensors, str(temporary))
        digests.append(sha256_file(temporary))

    atomic_write(path, write)
    return digests[0]


def encode_shards(
    windows: pd.DataFrame,
    genome_path: str | Path,
    outdir: str | Path,
    flank: int,
    shard_size: int,
    pairs_sha256: str = "",
    split_report: dict | None = None,
) -> dict:
    """Write every split's shards and `manifest.json` under `outdir`; returns the manifest.

    `split_report` is the windows report (or any dict with `split_mode` and `leak_prone`); its
    split mode travels in the manifest to the model and metrics.
    """
    outdir = Path(outdir)
    genome = Genome(genome_path)
    widths = {e: int((windows[f"{e}_end"] - windows[f"{e}_start"]).iloc[0]) for e in ("enhancer", "promoter")}
    shards = []
    for split, frame in windows.groupby("split", sort=False):
        (outdir / split).mkdir(parents=True, exist_ok=True)
        for number, offset in enumerate(range(0, len(frame), shard_size)):
            chunk = frame.iloc[offset : offset + shard_size]
            tensors = {
                e: encode_element(genome, chunk[f"{e}_chrom"], chunk[f"{e}_start"], chunk[f"{e}_end"], flank)
                for e in ("enhancer", "promoter")
            }
            tensors["label"] = chunk["label"].to_numpy(dtype=np.uint8)
            tensors["pair_id"] = chunk["pair_id"].to_numpy(dtype=np.int64)
            relative = f"{split}/shard-{number:05d}.safetensors"
            digest = write_shard(outdir / relative, tensors)
            shards.append({"path": relative, "split": split, "rows": len(chunk),
                           "positives": int(tensors["label"].sum()), "sha256": digest})  # fmt: skip
    manifest = {
        "format_version": FORMAT_VERSION,
        "epiformer_version": __version__,
        "channels": CHANNELS,
        "packing": "numpy.packbits(onehot[N, L, 4].reshape(N, -1), axis=1, bitorder='big') -> uint8 [N, L/2]",
        "widths": widths,
        "flank": flank,
        "lengths": {e: w + 2 * flank for e, w in widths.items()},
        "split": {"mode": (split_report or {}).get("split_mode", "chromosome"),
                  "leak_prone": bool((split_report or {}).get("leak_prone", False))},
        "shards": shards,
        "inputs": {"pairs_sha256": pairs_sha256, "genome_index_sha256": genome.index_sha256()},
    }
    genome.close()
    atomic_write_bytes(outdir / "manifest.json", json.dumps(manifest, indent=2).encode())
    return manifest
