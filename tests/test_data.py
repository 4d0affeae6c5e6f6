import numpy as np

from epiformer.data import SplitData, crop, iterate_batches, reverse_complement
from epiformer.encode import one_hot, pack_one_hot


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


def make_split(n=10, flank=2):
    rng = np.random.default_rng(0)
    seqs = [rng.choice(list(b"ACGT"), 12).astype(np.uint8).tobytes() for _ in range(n)]
    packed = pack_one_hot(one_hot(seqs))
    return SplitData({"enhancer": packed, "promoter": packed}, np.arange(n) % 2 == 0, np.arange(n) * 10,
                     {"enhancer": 12, "promoter": 12}, flank), seqs  # fmt: skip


def test_evaluation_batches_are_centred_and_in_order():
    data, seqs = make_split()
    batches = list(iterate_batches(data, 4))
    assert [len(b["label"]) for b in batches] == [4, 4, 2]
    first = batches[0]["enhancer"][0].numpy()
    np.testing.assert_array_equal(first, one_hot([seqs[0][2:10]])[0])
    assert batches[0]["pair_id"].tolist() == [0, 10, 20, 30]


def test_training_batches_are_reproducible_and_stay_within_the_flank():
    data, seqs = make_split()
    one = [b["enhancer"] for b in iterate_batches(data, 4, np.random.default_rng(5), 2, 0.5)]
    two = [b["enhancer"] for b in iterate_batches(data, 4, np.random.default_rng(5), 2, 0.5)]
    assert all((a == b).all() for a, b in zip(one, two))
    batch = next(iterate_batches(data, 10, np.random.default_rng(1), 2, 0.0))
    for row, pair_id in enumerate(batch["pair_id"].tolist()):
        seq = seqs[pair_id // 10]
        candidates = [one_hot([seq[2 + s : 10 + s]])[0] for s in range(-2, 3)]
        assert any((batch["enhancer"][row].numpy() == c).all() for c in candidates)
