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

from epiformer.constants import ELEMENTS, SEGMENT_IDS, SPAN_INPUT
from epiformer.data.length_control import spans_read_as
from epiformer.data.shards import ShardSet, Spans, segment_ids
from epiformer.sequence.onehot import crop, known_bases, reverse_complement, unpack


def check_shift(max_shift: int, flank: int) -> None:
    """A shift can reach only as far as the flank the shards store beyond each window or span."""
    if max_shift > flank:
        raise ValueError(
            f"A shift of up to {max_shift} bp was asked for, but the shards hold {flank} bp of flank beyond each "
            "window: ask for at most that, or encode the shards again with a larger augment.max_shift."
        )


def share_of_rank(batches: list, rank: int, world_size: int) -> list:
    """Batches rank, rank + w, rank + 2w, ... of w processes, cut to a multiple of w first."""
    if world_size > 1:  # every process must take the same number of steps, or DDP waits forever
        batches = batches[: len(batches) // world_size * world_size]
    return batches[rank::world_size]


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
        check_shift(max_shift, shards.flank)
        self.shards, self.batch_size = shards, batch_size
        self.seed, self.epoch, self.rank = seed, epoch, rank
        self.augment = shuffle and (max_shift > 0 or reverse_complement_prob > 0)
        self.max_shift, self.reverse_complement_prob = max_shift, reverse_complement_prob
        order = np.random.default_rng([seed, epoch]).permutation(len(shards)) if shuffle else np.arange(len(shards))
        # Disjoint per rank: rank r takes slices r, r + w, r + 2w, ... of batch size.
        self.batches = share_of_rank(
            [order[i : i + batch_size] for i in range(0, len(order), batch_size)], rank, world_size
        )

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


def token_budget_batches(lengths: np.ndarray, max_tokens: int, patch_size: int = 1) -> list[np.ndarray]:
    """Rows grouped by length so that each batch, padded to its longest row, holds at most `max_tokens`.

    A row of L bases is ceil(L / patch_size) model tokens. Rows are taken shortest first (ties
    in row order), so each batch holds rows of similar length and padding stays small. A row
    longer than the budget is a batch of its own: every row is in exactly one batch. Returns
    int64 row arrays, in length order.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    tokens = -(-np.asarray(lengths, dtype=np.int64) // patch_size)
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        # Ascending lengths: a batch's padded size is its row count times its last row's tokens.
        if end == len(order) or (end + 1 - start) * int(tokens[order[end]]) > max_tokens:
            batches.append(order[start:end].astype(np.int64))
            start = end
    return batches


class SpanBatches(torch.utils.data.Dataset):
    """Batches of one split's spans for one epoch, bucketed by length under a budget of model tokens.

    Each batch holds rows of similar length whose padded size (rows x the longest span's
    model tokens, `patch_size` bases each) stays within `max_tokens`, so memory stays flat
    however long the spans are. Which rows share a batch is fixed by the data
    (`token_budget_batches`); an epoch shuffles the order of the batches from (seed, epoch),
    so with one process every pair is seen exactly once per epoch. With w processes, rank r
    takes batches r, r + w, ... of that order, cut to a multiple of w so that every process
    takes the same number of steps: up to w - 1 batches (others each epoch) are left out, as
    `PairBatches` leaves out a last partial slice. `max_tokens` is per process.

    Items: `span` float [B, L, 4] one-hot (N bases all zero); `segment` int64 [B, L]
    (`SEGMENT_IDS`: enhancer 0, promoter 1, between 2); `span_valid` bool [B, L], True at
    real, non-N bases (padding and N are False, so an all-N token is neither attended to nor
    pooled, while positions still count the gap); `label`, `pair_id`, `distance` (the span
    length), `source`. Training batches may be augmented: the whole span shifted by up to
    the stored flank, and reverse-complemented with probability `reverse_complement_prob`
    (its segments reversed with it, so each base keeps its element).
    """

    def __init__(
        self,
        spans,
        max_tokens: int,
        patch_size: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        max_shift: int = 0,
        reverse_complement_prob: float = 0.0,
        rank: int = 0,
        world_size: int = 1,
    ):
        check_shift(max_shift, spans.flank)
        self.spans, self.seed, self.epoch, self.rank = spans, seed, epoch, rank
        self.augment = shuffle and (max_shift > 0 or reverse_complement_prob > 0)
        self.max_shift, self.reverse_complement_prob = max_shift, reverse_complement_prob
        self.span_lengths = spans.lengths - 2 * spans.flank
        batches = token_budget_batches(self.span_lengths, max_tokens, patch_size)
        if len(batches) < world_size:
            raise ValueError(
                f"{len(batches)} span batches of at most {max_tokens} tokens for {world_size} processes: each process "
                "needs one at least. Lower train.max_tokens_per_batch or train.devices."
            )
        if shuffle:
            batches = [batches[i] for i in np.random.default_rng([seed, epoch]).permutation(len(batches))]
        self.batches = share_of_rank(batches, rank, world_size)

    def __len__(self) -> int:
        return len(self.batches)

    def bases(self) -> int:
        """Span bases in this process's batches (without padding)."""
        return int(sum(self.span_lengths[rows].sum() for rows in self.batches))

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rows = self.batches[index]
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, index]) if self.augment else None
        if rng is None:
            shifts, flips = np.zeros(len(rows), int), np.zeros(len(rows), bool)
        else:
            shifts = rng.integers(-self.max_shift, self.max_shift + 1, len(rows))
            flips = rng.random(len(rows)) < self.reverse_complement_prob
        longest = int(self.span_lengths[rows].max())
        span = np.zeros((len(rows), longest, 4), dtype=np.uint8)
        segment = np.full((len(rows), longest), SEGMENT_IDS["between"], dtype=np.int64)
        valid = np.zeros((len(rows), longest), dtype=bool)
        for i, (row, shift, flip) in enumerate(zip(rows, shifts, flips)):
            bases, segments = self._one_span(int(row), int(shift))
            known = known_bases(bases)
            if flip:
                bases, segments, known = bases[::-1, ::-1], segments[::-1], known[::-1]  # complement: channel flip
            span[i, : len(bases)], segment[i, : len(bases)], valid[i, : len(bases)] = bases, segments, known
        return {
            "span": torch.from_numpy(span).float(),
            "segment": torch.from_numpy(segment),
            "span_valid": torch.from_numpy(valid),
            "label": torch.from_numpy(self.spans.label[rows].astype(np.float32)),
            "pair_id": torch.from_numpy(self.spans.pair_id[rows]),
            "distance": torch.from_numpy(self.spans.distance[rows].astype(np.float32)),
            "source": torch.from_numpy(self.spans.source[rows]),
        }

    def _one_span(self, row: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """uint8 [L, 4] one-hot of the span shifted by `shift` bases, and each base's segment id, int64 [L]."""
        length, flank = int(self.span_lengths[row]), self.spans.flank
        bases = self.spans.onehot(row)[flank + shift : flank + shift + length]
        first_end, second_start = self.spans.segments[row]
        position = np.arange(length) + shift  # in span coordinates: a shifted base keeps its segment by place
        segments = segment_ids(position, first_end, second_start, self.spans.enhancer_first[row]).astype(np.int64)
        return bases, segments


def model_batches(
    model_input: str,
    data,
    batch_size: int,
    max_tokens: int,
    patch_size: int,
    between: str = "sequence",
    **augmentation,
):
    """The batches a model reads, decided by what it reads (`ModelConfig.input`, `.between`) and checked against
    the data.

    `elements`: PairBatches of `batch_size` pairs from window shards; `span`: SpanBatches of at
    most `max_tokens` model tokens (`patch_size` bases each) from span shards, their between
    segment shuffled for a length control (`between` "shuffled", `data.length_control`).
    """
    spans = isinstance(data, Spans)
    if (model_input == SPAN_INPUT) != spans:
        given = "span shards" if spans else "element-window shards"
        wanted = "span shards (results/{cell}/span_shards)" if model_input == SPAN_INPUT else "element-window shards"
        raise ValueError(f"A model of input {model_input!r} reads {wanted}, but was given {given}.")
    if spans:
        return SpanBatches(spans_read_as(data, between), max_tokens, patch_size, **augmentation)
    if between != "sequence":
        raise ValueError(f"between {between!r} (a length control) is for span models; this model reads elements.")
    return PairBatches(data, batch_size, **augmentation)
