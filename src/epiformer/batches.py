"""Batches for the model: a split's pairs, shuffled, augmented and unpacked, as tensors.

`PairBatches` is a map-style dataset whose items are whole batches, for a `DataLoader` with
`batch_size=None` and any number of workers. Batch i of an epoch holds the same pairs with
the same augmentation whatever the number of workers: the order comes from
(seed, epoch) and each batch's augmentation from (seed, epoch, rank, i). With several
processes (distributed training), rank r of w takes every w-th batch-sized slice of the
shuffled order, so ranks read disjoint pairs.

Training batches may be augmented: each element shifted by a random offset within the
stored flank and reverse-complemented with probability `reverse_complement_prob`, each
element of each pair drawn independently (enhancers act in either orientation). Validation
and test batches are the centred windows, never augmented.
"""

from __future__ import annotations

import numpy as np
import torch

from epiformer.constants import ELEMENTS
from epiformer.shards import ShardSet, crop, reverse_complement, unpack


class PairBatches(torch.utils.data.Dataset):
    """Batches of one split for one epoch; item i is batch i (see module docstring)."""

    def __init__(
        self,
        shards: ShardSet,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        max_shift: int = 0,
        reverse_complement_prob: float = 0.0,
        rank: int = 0,
        world_size: int = 1,
    ):
        self.shards, self.batch_size = shards, batch_size
        self.seed, self.epoch, self.rank = seed, epoch, rank
        if max_shift > shards.flank:
            raise ValueError(
                f"A shift of up to {max_shift} bp was asked for, but the shards hold {shards.flank} bp of flank "
                "beyond each window: ask for at most that, or encode the shards again with a larger "
                "augment.max_shift."
            )
        self.augment = shuffle and (max_shift > 0 or reverse_complement_prob > 0)
        self.max_shift, self.reverse_complement_prob = max_shift, reverse_complement_prob
        order = np.random.default_rng([seed, epoch]).permutation(len(shards)) if shuffle else np.arange(len(shards))
        # Disjoint per rank: rank r takes slices r, r + w, r + 2w, ... of batch size.
        slices = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        if world_size > 1:  # every process must take the same number of steps, or DDP waits forever
            slices = slices[: len(slices) // world_size * world_size]
        self.batches = slices[rank::world_size]

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rows = np.sort(self.batches[index])  # sorted rows read the memory map in file order
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, index]) if self.augment else None
        batch = {}
        for element in ELEMENTS:
            onehot = unpack(self.shards.packed(element, rows), self.shards.lengths[element])
            if rng is None:
                onehot = crop(onehot, self.shards.flank, np.zeros(len(rows), dtype=int))
            else:
                onehot = crop(onehot, self.shards.flank, rng.integers(-self.max_shift, self.max_shift + 1, len(rows)))
                flip = rng.random(len(rows)) < self.reverse_complement_prob
                if flip.any():
                    onehot = reverse_complement(onehot, flip)
            batch[element] = torch.from_numpy(np.ascontiguousarray(onehot)).float()
        batch["label"] = torch.from_numpy(self.shards.label[rows].astype(np.float32))
        batch["pair_id"] = torch.from_numpy(self.shards.pair_id[rows])
        batch["distance"] = torch.from_numpy(self.shards.distance[rows].astype(np.float32))
        batch["source"] = torch.from_numpy(self.shards.source[rows])
        return batch


def batch_loader(batches: PairBatches, workers: int = 0) -> torch.utils.data.DataLoader:
    """A DataLoader over whole batches; `workers` processes build them in parallel."""
    # Its own generator: a DataLoader otherwise draws a seed from the global torch RNG, which
    # would shift the dropout stream between a resumed run and an uninterrupted one.
    return torch.utils.data.DataLoader(
        batches,
        batch_size=None,
        shuffle=False,
        num_workers=workers,
        persistent_workers=False,
        prefetch_factor=4 if workers else None,
        generator=torch.Generator().manual_seed(0),
    )
