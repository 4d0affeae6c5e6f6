"""epiformer.batches: a split's pairs as model batches, centred or augmented, in any number of workers."""

import numpy as np
import torch

from epiformer.batches import PairBatches, batch_loader
from epiformer.encode import encode_shards, one_hot
from epiformer.genome import Genome
from epiformer.shards import load_split


def expected_onehot(genome, window, element, shift=0, flank=2):
    start, end = window[f"{element}_start"] + shift, window[f"{element}_end"] + shift
    return one_hot([genome.fetch(window[f"{element}_chrom"], start, end)])[0]


def test_evaluation_batches_are_centred_in_order_and_cover_every_pair(small_shards):
    path, windows, shard_dir = small_shards
    data = load_split(shard_dir, "train")
    batches = list(batch_loader(PairBatches(data, 10)))
    assert [len(b["label"]) for b in batches] == [10, 10, 10, 10, 7]
    ids = torch.cat([b["pair_id"] for b in batches]).tolist()
    assert ids == windows["pair_id"].tolist()
    genome, by_id = Genome(path), windows.set_index("pair_id")
    for batch in batches:
        for row, pair_id in enumerate(batch["pair_id"].tolist()):
            for element in ("enhancer", "promoter"):
                expected = expected_onehot(genome, by_id.loc[pair_id], element)
                np.testing.assert_array_equal(batch[element][row].numpy(), expected)


def test_training_batches_shift_within_the_flank_and_do_not_depend_on_workers(small_shards):
    path, windows, shard_dir = small_shards
    data = load_split(shard_dir, "train")
    batches = PairBatches(data, 8, shuffle=True, seed=3, epoch=1, max_shift=2, reverse_complement_prob=0.0)
    in_process = list(batch_loader(batches))
    with_workers = list(batch_loader(batches, workers=2))
    assert len(in_process) == len(with_workers) == 6
    for a, b in zip(in_process, with_workers):
        assert all(torch.equal(a[k], b[k]) for k in a)
    genome, by_id = Genome(path), windows.set_index("pair_id")
    for batch in in_process:
        for row, pair_id in enumerate(batch["pair_id"].tolist()):
            candidates = [expected_onehot(genome, by_id.loc[pair_id], "enhancer", s) for s in range(-2, 3)]
            assert any((batch["enhancer"][row].numpy() == c).all() for c in candidates)
    other_epoch = list(batch_loader(PairBatches(data, 8, shuffle=True, seed=3, epoch=2)))
    assert [b["pair_id"].tolist() for b in other_epoch] != [b["pair_id"].tolist() for b in in_process]


def test_ranks_read_disjoint_pairs_that_cover_the_split(small_shards):
    _, windows, shard_dir = small_shards
    data = load_split(shard_dir, "train")
    seen = []
    for rank in range(3):
        batches = PairBatches(data, 4, shuffle=True, seed=0, epoch=1, rank=rank, world_size=3)
        seen.append({i for b in batch_loader(batches) for i in b["pair_id"].tolist()})
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    assert set().union(*seen) == set(windows["pair_id"])


def test_reverse_complement_augmentation_with_probability_one_flips_every_element(small_shards):
    path, windows, shard_dir = small_shards
    data = load_split(shard_dir, "train")
    batch = PairBatches(data, 47, shuffle=True, seed=1, epoch=1, reverse_complement_prob=1.0)[0]
    genome, window = Genome(path), windows.set_index("pair_id").loc[int(batch["pair_id"][0])]
    for element in ("enhancer", "promoter"):
        forward = expected_onehot(genome, window, element)
        np.testing.assert_array_equal(batch[element][0].numpy(), forward[::-1, ::-1])
    half = PairBatches(data, 47, shuffle=True, seed=1, epoch=1, reverse_complement_prob=0.5)[0]
    flipped = {}
    for element in ("enhancer", "promoter"):
        rows = [
            Genome(path).fetch(
                *[windows.set_index("pair_id").loc[int(i), f"{element}_{c}"] for c in ("chrom", "start", "end")]
            )
            for i in half["pair_id"]
        ]
        forward = torch.from_numpy(one_hot(rows)).float()
        flipped[element] = (half[element] != forward).flatten(1).any(dim=1)
    assert 0 < flipped["enhancer"].sum() < 47 and not torch.equal(flipped["enhancer"], flipped["promoter"])


def test_batches_of_pooled_folders_carry_each_pairs_source_and_distance(small_shards, tmp_path):
    path, windows, shard_dir = small_shards
    other = windows.iloc[:9].copy()
    other["distance"] = other["distance"] + 1000  # told apart from the first folder's
    encode_shards(other, path, tmp_path / "other", flank=2, shard_size=4)
    pooled = load_split([shard_dir, tmp_path / "other"], "train")
    (batch,) = batch_loader(PairBatches(pooled, len(pooled)))
    assert batch["source"].tolist() == [0] * len(windows) + [1] * 9
    assert batch["distance"].tolist() == windows["distance"].tolist() + other["distance"].tolist()
    assert batch["pair_id"].tolist() == windows["pair_id"].tolist() + other["pair_id"].tolist()
