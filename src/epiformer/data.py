"""Reading shards back (layout in `epiformer.encode`) and serving training batches.

Sequences stay bit-packed in memory (1/32 of float one-hot) and are unpacked per batch.
Training batches may be augmented: each element is shifted by a random offset within the
stored flank and, independently per pair, both elements are reverse-complemented.
Validation and test batches are the centred windows, never augmented.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file

from epiformer.encode import FORMAT_VERSION
from epiformer.fileio import sha256_file

ELEMENTS = ("enhancer", "promoter")


class ShardError(ValueError):
    """A shard that is missing, corrupt or does not match its manifest."""


@dataclass
class SplitData:
    packed: dict[str, np.ndarray]  # element -> uint8 [N, L/2]
    label: np.ndarray  # uint8 [N]
    pair_id: np.ndarray  # int64 [N]
    lengths: dict[str, int]  # stored length L per element (window + 2 * flank)
    flank: int

    def __len__(self) -> int:
        return len(self.label)


def load_manifest(shard_dir: str | Path) -> dict:
    path = Path(shard_dir) / "manifest.json"
    if not path.exists():
        raise ShardError(f"{path} is missing: re-run the encode step for this cell line.")
    manifest = json.loads(path.read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ShardError(f"{path}: shard format {manifest.get('format_version')}, this epiformer reads {FORMAT_VERSION}.")
    return manifest


def load_split(shard_dir: str | Path, split: str, verify: bool = True) -> SplitData:
    """Concatenate one split's shards, checking hashes, shapes and row counts against the manifest."""
    shard_dir = Path(shard_dir)
    manifest = load_manifest(shard_dir)
    parts = []
    for entry in (s for s in manifest["shards"] if s["split"] == split):
        path = shard_dir / entry["path"]
        if not path.exists():
            raise ShardError(f"{path} is listed in the manifest but missing: re-run the encode step.")
        if verify and sha256_file(path) != entry["sha256"]:
            raise ShardError(f"{path}: SHA-256 differs from manifest.json (corrupt or foreign shard); re-encode.")
        tensors = load_file(str(path))
        for element in ELEMENTS:
            expected = (entry["rows"], manifest["lengths"][element] // 2)
            if tensors[element].shape != expected:
                raise ShardError(f"{path}: {element} has shape {tensors[element].shape}, manifest says {expected}.")
        parts.append(tensors)
    if not parts:
        raise ShardError(f"{shard_dir}: manifest lists no shards for the {split!r} split.")
    return SplitData(
        packed={e: np.concatenate([p[e] for p in parts]) for e in ELEMENTS},
        label=np.concatenate([p["label"] for p in parts]),
        pair_id=np.concatenate([p["pair_id"] for p in parts]),
        lengths=dict(manifest["lengths"]),
        flank=int(manifest["flank"]),
    )


def unpack(packed: np.ndarray, length: int) -> np.ndarray:
    """uint8 [B, L/2] -> uint8 [B, L, 4] one-hot."""
    return np.unpackbits(packed, axis=1, bitorder="big").reshape(len(packed), length, 4)


def crop(onehot: np.ndarray, flank: int, shifts: np.ndarray) -> np.ndarray:
    """[B, L, 4] -> [B, L - 2 * flank, 4], each row starting at flank + its shift."""
    width = onehot.shape[1] - 2 * flank
    index = (flank + shifts)[:, None] + np.arange(width)[None, :]  # (B, W)
    return onehot[np.arange(len(onehot))[:, None], index]  # (B, W, 4)


def reverse_complement(onehot: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """Reverse-complement the rows where `flip`; with channels A, C, G, T, complement is a channel flip."""
    out = onehot.copy()
    out[flip] = onehot[flip, ::-1, ::-1]
    return out


def iterate_batches(
    data: SplitData,
    batch_size: int,
    rng: np.random.Generator | None = None,
    max_shift: int = 0,
    reverse_complement_prob: float = 0.0,
) -> Iterator[dict[str, torch.Tensor]]:
    """Batches of float32 one-hot windows. With `rng`, shuffled and augmented; without, in order, centred."""
    order = rng.permutation(len(data)) if rng is not None else np.arange(len(data))
    shift = min(max_shift, data.flank)
    for offset in range(0, len(order), batch_size):
        rows = np.sort(order[offset : offset + batch_size])
        batch = {}
        flip = rng.random(len(rows)) < reverse_complement_prob if rng is not None else None
        for element in ELEMENTS:
            onehot = unpack(data.packed[element][rows], data.lengths[element])
            shifts = rng.integers(-shift, shift + 1, len(rows)) if rng is not None else np.zeros(len(rows), int)
            onehot = crop(onehot, data.flank, shifts)
            if flip is not None and flip.any():
                onehot = reverse_complement(onehot, flip)
            batch[element] = torch.from_numpy(np.ascontiguousarray(onehot)).float()
        batch["label"] = torch.from_numpy(data.label[rows].astype(np.float32))
        batch["pair_id"] = torch.from_numpy(data.pair_id[rows])
        yield batch
