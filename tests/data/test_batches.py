"""epiformer.data.batches: a split's pairs as model batches, centred or augmented, in any number of workers."""

import numpy as np
import pytest
import torch

from epiformer.data.batches import PairBatches, SpanBatches, batch_loader, token_budget_batches
from epiformer.data.encode import encode_shards
from epiformer.data.genome import Genome
from epiformer.data.shards import load_split
from epiformer.data.spans import span_coordinates
from epiformer.sequence.onehot import one_hot
from tests.helpers import encode_spans_of_fasta, windows_frame


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


def varied_span_shards(small_fasta, tmp_path, pairs: int = 40, flank: int = 3):
    """`pairs` spans on chrA of small_fasta, 30 to ~400 bp, both orders, in shards of 6."""
    path, _ = small_fasta
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(pairs):
        first = int(rng.integers(5, 60))  # room for the flank: no shifted span leaves chrA
        second = first + int(rng.integers(14, 380))
        promoter_first = rng.random() < 0.5
        enhancer, promoter = (second, first) if promoter_first else (first, second)
        rows.append(("chrA", enhancer, enhancer + 12, "chrA", promoter, promoter + 10))
    windows = windows_frame(rows)
    encode_spans_of_fasta(windows, path, tmp_path / "spans", flank=flank, shard_size=6)
    return path, windows, load_split(tmp_path / "spans", "train")


@pytest.mark.parametrize("max_tokens", [1, 150, 600, 5000])
@pytest.mark.parametrize("patch", [1, 4])
def test_token_budget_batches_hold_every_row_once_within_the_budget(max_tokens, patch):
    lengths = np.random.default_rng(0).integers(1, 400, 300)
    tokens = -(-lengths // patch)  # a row of L bases is ceil(L / patch) tokens
    batches = token_budget_batches(lengths, max_tokens, patch)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(300))  # every row exactly once
    for batch in batches:
        assert len(batch) == 1 or len(batch) * tokens[batch].max() <= max_tokens
    if max_tokens >= 2 * tokens.max():  # room for two of the longest: batches are as full as the order allows
        merged = [np.concatenate([a, b]) for a, b in zip(batches, batches[1:])]
        assert all(len(m) * tokens[m].max() > max_tokens for m in merged)


def test_span_batches_cover_every_pair_once_per_epoch_and_respect_the_budget(small_fasta, tmp_path):
    _, windows, data = varied_span_shards(small_fasta, tmp_path)
    span_lengths = data.lengths - 2 * data.flank
    for epoch in (1, 2):
        batches = SpanBatches(data, 800, shuffle=True, seed=1, epoch=epoch, max_shift=3, reverse_complement_prob=0.5)
        seen = [b["pair_id"].tolist() for b in batch_loader(batches)]
        assert sorted(i for ids in seen for i in ids) == sorted(windows["pair_id"])
        for batch in batch_loader(batches):
            rows, longest = len(batch["label"]), batch["span"].shape[1]
            assert rows == 1 or rows * longest <= 800
            assert longest == span_lengths[np.searchsorted(data.pair_id, batch["pair_id"].numpy())].max()
    orders = [[b["pair_id"].tolist() for b in SpanBatches(data, 800, shuffle=True, seed=1, epoch=e)] for e in (1, 2)]
    assert orders[0] != orders[1]  # another epoch, another order of batches


def expected_span(genome, spans_row, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """One-hot and segment ids of a span shifted by `shift`, from the genome and coordinates, apart from the package."""
    start, end = spans_row.span_start + shift, spans_row.span_end + shift
    bases = one_hot([genome.fetch(spans_row.chrom, start, end)])[0]
    position = np.arange(end - start) + shift
    first, second = (0, 1) if spans_row.enhancer_first else (1, 0)
    segments = np.where(position < spans_row.first_end, first, np.where(position < spans_row.second_start, 2, second))
    return bases, segments


def test_span_batches_hold_the_genome_shifted_within_the_flank_and_reverse_complemented(small_fasta, tmp_path):
    path, windows, data = varied_span_shards(small_fasta, tmp_path)
    genome, spans = Genome(path), span_coordinates(windows).set_index("pair_id")
    centred = list(batch_loader(SpanBatches(data, 900)))
    for batch in centred:
        for row, pair_id in enumerate(batch["pair_id"].tolist()):
            bases, segments = expected_span(genome, spans.loc[pair_id], 0)
            length = len(bases)
            np.testing.assert_array_equal(batch["span"][row, :length].numpy(), bases)
            np.testing.assert_array_equal(batch["segment"][row, :length].numpy(), segments)
            np.testing.assert_array_equal(batch["span_valid"][row].numpy(), np.arange(batch["span"].shape[1]) < length)
            assert batch["distance"][row] == length
    for flip in (0.0, 1.0):
        augmented = SpanBatches(data, 900, shuffle=True, seed=2, epoch=1, max_shift=3, reverse_complement_prob=flip)
        for batch in batch_loader(augmented):
            for row, pair_id in enumerate(batch["pair_id"].tolist()):
                candidates = [expected_span(genome, spans.loc[pair_id], s) for s in range(-3, 4)]
                if flip:
                    candidates = [(b[::-1, ::-1], s[::-1]) for b, s in candidates]
                length = len(candidates[0][0])
                got = batch["span"][row, :length].numpy(), batch["segment"][row, :length].numpy()
                assert any((got[0] == b).all() and (got[1] == s).all() for b, s in candidates)


def test_span_ranks_take_disjoint_batches_and_the_same_number_of_steps(small_fasta, tmp_path):
    _, windows, data = varied_span_shards(small_fasta, tmp_path)
    ranks = [SpanBatches(data, 700, shuffle=True, seed=0, epoch=1, rank=r, world_size=3) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1
    seen = [{i for b in batch_loader(r) for i in b["pair_id"].tolist()} for r in ranks]
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    whole = len(token_budget_batches(data.lengths - 2 * data.flank, 700))
    assert len(ranks[0]) == whole // 3
    with pytest.raises(ValueError, match="max_tokens_per_batch or train.devices"):
        SpanBatches(data, 10**9, world_size=2)  # one batch holds every span: nothing for the second process


def test_span_batches_do_not_depend_on_loader_workers(small_fasta, tmp_path):
    _, _, data = varied_span_shards(small_fasta, tmp_path)
    batches = SpanBatches(data, 600, shuffle=True, seed=4, epoch=3, max_shift=3, reverse_complement_prob=0.5)
    for a, b in zip(batch_loader(batches), batch_loader(batches, workers=2), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
