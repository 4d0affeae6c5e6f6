"""One-hot DNA, its bit packing, crops and reverse complement (epiformer.sequence.onehot)."""

import numpy as np

from epiformer.sequence.onehot import (
    crop,
    known_bases,
    one_hot,
    pack_codes,
    pack_one_hot,
    reverse_complement,
    unpack,
    write_bases,
)


def test_crop_takes_each_row_at_its_own_shift():
    onehot = one_hot([b"ACGTACGTAC", b"TTGGCCAATT"])
    out = crop(onehot, flank=2, shifts=np.array([-2, 1]))
    np.testing.assert_array_equal(out[0], one_hot([b"ACGTAC"])[0])
    np.testing.assert_array_equal(out[1], one_hot([b"GCCAAT"])[0])


def test_reverse_complement_flips_only_selected_rows():
    onehot = one_hot([b"AACG", b"AACG"])
    out = reverse_complement(onehot, np.array([True, False]))
    np.testing.assert_array_equal(out[0], one_hot([b"CGTT"])[0])
    np.testing.assert_array_equal(out[1], onehot[1])


def test_one_hot_channels_and_n_rows():
    onehot = one_hot([b"ACGTNacgtR"])[0]
    expected = np.zeros((10, 4), np.uint8)
    for i, channel in enumerate([0, 1, 2, 3, None, 0, 1, 2, 3, None]):
        if channel is not None:
            expected[i, channel] = 1
    np.testing.assert_array_equal(onehot, expected)


def test_packing_is_numpy_packbits_big_endian_and_round_trips():
    onehot = one_hot([b"ACGTNNCA", b"TTTTGGGG"])
    packed = pack_one_hot(onehot)
    assert packed.dtype == np.uint8 and packed.shape == (2, 4)  # L / 2 bytes
    assert packed[0, 0] == 0b10000100  # A = 1000, C = 0100, big bit order
    np.testing.assert_array_equal(unpack(packed, 8), onehot)


def test_fast_packing_equals_the_defined_layout():
    rng = np.random.default_rng(0)
    codes = np.frombuffer(b"ACGTNacgtRY-", np.uint8)[rng.integers(0, 12, (50, 64))]

    np.testing.assert_array_equal(pack_codes(codes), pack_one_hot(one_hot(codes)))


def test_written_bases_equal_packing_the_changed_sequences():
    """Both nibbles of one byte in one call (an MNV), N and the last base of a row included."""
    rng = np.random.default_rng(3)
    codes = rng.choice(np.frombuffer(b"ACGTN", dtype=np.uint8), (6, 20))
    packed = pack_codes(codes)
    rows, positions = np.array([0, 0, 0, 2, 5, 5]), np.array([4, 5, 19, 0, 10, 11])
    bases = np.frombuffer(b"TGNCAa", dtype=np.uint8)
    changed = codes.copy()
    changed[rows, positions] = bases
    write_bases(packed, rows, positions, bases)
    np.testing.assert_array_equal(packed, pack_one_hot(one_hot(changed)))


def test_known_bases_are_the_rows_with_a_base_whatever_the_array_layout():
    rng = np.random.default_rng(0)
    onehot = np.eye(4, dtype=np.uint8)[rng.integers(0, 4, 1000)]
    onehot[rng.random(1000) < 0.2] = 0  # N
    onehot[::7] = 1  # soft-decoded rows: any nonzero channel counts
    for layout in (onehot, onehot[::-1, ::-1], onehot[::3], np.asfortranarray(onehot)):
        np.testing.assert_array_equal(known_bases(layout), layout.any(axis=1))
