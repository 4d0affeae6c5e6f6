"""The length control: spans whose between-sequence is shuffled, elements, length and N runs kept.

A span's length is its pair's distance, and distance predicts contact on every benchmark: a
span model can score well by reading how long its input is (and where its N runs lie)
without reading the sequence between its elements. The control model reads each span with
the bases of its between segment shuffled: the same length, the same N positions, the same
base composition, the same two elements, but no motif and no order between them. What a span
model gains beyond its control is what the sequence between the elements gives.

The shuffle is a fixed function of the pair (its pair_id and place), the same in every epoch,
in evaluation and in prediction, so the control is one data set, not noise redrawn each step.
"""

from __future__ import annotations

import numpy as np

from epiformer.sequence.onehot import onehot_rows

SHUFFLE_SALT = 38_2026  # separates this stream from every other seeded draw of (pair_id, start)


def shuffle_between(bases: np.ndarray, first_end: int, second_start: int, seed: tuple[int, ...]) -> np.ndarray:
    """A copy of one-hot `bases` [L, 4] whose non-N rows in [first_end, second_start) are permuted.

    N rows (all zeros) keep their place, so the span keeps its N runs; every other base of the
    between segment moves, drawn from `seed`.
    """
    bases = np.ascontiguousarray(bases).copy()
    rows = onehot_rows(bases)  # a base is nonzero; moving a row moves its four channels
    start, stop = max(first_end, 0), min(second_start, len(bases))
    called = start + np.flatnonzero(rows[start:stop])
    rows[called] = rows[np.random.default_rng(seed).permutation(called)]
    return bases


class ShuffledBetween:
    """`Spans` (or span shards) whose `onehot(row)` is the length control's: its between segment shuffled.

    Everything else (labels, segments, lengths, coordinates) is the wrapped spans' own.
    """

    def __init__(self, spans):
        self._spans = spans

    def __getattr__(self, name):
        if name == "_spans":  # not set yet (unpickling in a loader worker): no recursion
            raise AttributeError(name)
        return getattr(self._spans, name)

    def __len__(self) -> int:
        return len(self._spans)

    def onehot(self, row: int) -> np.ndarray:
        spans, flank = self._spans, self._spans.flank
        first_end, second_start = (int(value) for value in spans.segments[row])
        seed = (SHUFFLE_SALT, int(spans.pair_id[row]), int(spans.chrom[row]), int(spans.span_start[row]))
        return shuffle_between(spans.onehot(row), flank + first_end, flank + second_start, seed)


def spans_read_as(spans, between: str):
    """The spans a model of `between` (`constants.BETWEEN`, checked by ModelConfig) reads."""
    return ShuffledBetween(spans) if between == "shuffled" else spans
