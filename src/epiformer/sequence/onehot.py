"""DNA as arrays: one-hot, its bit packing, reverse complement and shifted crops (no PyTorch).

One-hot (the one place it is defined): uint8 [..., L, 4], channels A, C, G, T
(`constants.ALPHABET`); N and every other code is all zeros; lower case (soft-masked) bases
are their upper-case selves. Packed: the one-hot [L, 4] of a sequence flattened row-major to
4*L bits and packed with `numpy.packbits(..., bitorder="big")`, so uint8 [L/2] a sequence:
base 2k in the high nibble of byte k, base 2k + 1 in the low one. Shards store this packing
(`data.encode` writes it, `data.shards` reads it back); the genome's strand is +.

With channels A, C, G, T, the complement is the reversed channel order, so the reverse
complement of a one-hot sequence is `onehot[::-1, ::-1]`. (DNA strings: `sequence.motifs`.)
"""

from __future__ import annotations

import numpy as np

from epiformer.constants import ALPHABET

ONE_HOT_TABLE = np.zeros((256, 4), dtype=np.uint8)
for _channel, _base in enumerate(ALPHABET):
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


def unpack(packed: np.ndarray, length: int) -> np.ndarray:
    """uint8 [N, L/2] packed -> uint8 [N, L, 4] one-hot: the inverse of pack_one_hot."""
    return np.unpackbits(packed, axis=1, bitorder="big").reshape(len(packed), length, 4)


# The 4 packed bits of each ASCII code: A -> 0b1000, C -> 0b0100, G -> 0b0010, T -> 0b0001, others 0.
BASE_NIBBLE = np.packbits(ONE_HOT_TABLE, axis=1, bitorder="big")[:, 0] >> 4


def _pair_table() -> np.ndarray:
    """Packed byte of every two-base pair, indexed by the pair read as one little-endian uint16."""
    first, second = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    table = np.zeros(65536, dtype=np.uint8)
    table[first + 256 * second] = (BASE_NIBBLE[first] << 4) | BASE_NIBBLE[second]
    return table


PAIR_TABLE = _pair_table()


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """uint8 [N, L] ASCII bases -> uint8 [N, L/2], equal to pack_one_hot(one_hot(codes)).

    One table lookup per two bases, without materialising the [N, L, 4] one-hot: the
    packing is defined by pack_one_hot, this is its fast path (tested equal).
    """
    pairs = np.ascontiguousarray(codes).view("<u2")  # (N, L/2): first base in the low byte
    return PAIR_TABLE[pairs]


def write_bases(packed: np.ndarray, rows: np.ndarray, positions: np.ndarray, codes: np.ndarray) -> None:
    """Set base `positions[i]` of row `rows[i]` of `packed` (uint8 [N, L/2]) to ASCII code `codes[i]`, in place.

    The result equals packing the changed sequences anew (tested). A (row, position) may
    appear only once.
    """
    rows, positions = np.asarray(rows, dtype=np.int64), np.asarray(positions, dtype=np.int64)
    nibbles = BASE_NIBBLE[np.asarray(codes, dtype=np.uint8)]
    # High and low nibbles apart: two bases of one byte, set in one assignment, would overwrite each other.
    for high in (True, False):
        chosen = (positions % 2 == 0) == high
        r, byte, nibble = rows[chosen], positions[chosen] // 2, nibbles[chosen]
        kept = packed[r, byte] & (0x0F if high else 0xF0)
        packed[r, byte] = kept | (nibble << 4 if high else nibble)


def unpack_nibbles(packed: np.ndarray) -> np.ndarray:
    """uint8 [B] packed -> uint8 [2B]: each base's 4 bits (base 2k from byte k's high nibble, 2k + 1 its low)."""
    nibbles = np.empty(2 * len(packed), dtype=np.uint8)
    nibbles[0::2], nibbles[1::2] = packed >> 4, packed & 0x0F
    return nibbles


def pack_nibbles(nibbles: np.ndarray) -> np.ndarray:
    """uint8 [L] one nibble a base -> uint8 [ceil(L / 2)] packed; an odd L ends in a zero (N) nibble."""
    if len(nibbles) % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] << 4) | nibbles[1::2]


# How many of a packed byte's two bases are not A, C, G or T (an all-zero nibble): 0, 1 or 2.
UNKNOWN_IN_BYTE = np.array([(byte >> 4 == 0) + (byte & 0x0F == 0) for byte in range(256)], dtype=np.int64)


def count_unknown(packed: np.ndarray) -> int:
    """Bases of a packed sequence that are not A, C, G or T (N; a padding nibble counts too)."""
    return int(np.bincount(packed, minlength=256) @ UNKNOWN_IN_BYTE)


def onehot_rows(onehot: np.ndarray) -> np.ndarray:
    """uint32 [L] view of a contiguous uint8 [L, 4] one-hot: each row's four bytes as one number, 0 for N.

    Testing or moving a base as one number is what makes `known_bases` and the length control's
    shuffle fast: numpy's any over an axis of 4 took a tenth of a span model's step (8 ms for 0.5 M
    bases). Writes through the view change `onehot`.
    """
    return onehot.view(np.uint32)[:, 0]


def known_bases(onehot: np.ndarray) -> np.ndarray:
    """bool [L]: which rows of a uint8 [L, 4] one-hot (any layout) are a base, not N."""
    return onehot_rows(np.ascontiguousarray(onehot)) != 0


def crop(onehot: np.ndarray, flank: int, shifts: np.ndarray) -> np.ndarray:
    """[B, L, 4] -> [B, L - 2 * flank, 4], each row starting at flank + its shift."""
    width = onehot.shape[1] - 2 * flank
    index = (flank + shifts)[:, None] + np.arange(width)[None, :]  # (B, W)
    return onehot[np.arange(len(onehot))[:, None], index]  # (B, W, 4)


def reverse_complement(onehot: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """[B, L, 4] with the rows where `flip` reverse-complemented (reversed, channels flipped)."""
    out = onehot.copy()
    out[flip] = onehot[flip, ::-1, ::-1]
    return out
