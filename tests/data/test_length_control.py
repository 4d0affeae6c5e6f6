import numpy as np
import pytest
import torch

from epiformer.constants import SEGMENT_IDS
from epiformer.data.batches import SpanBatches, batch_loader, model_batches
from epiformer.data.genome import Genome
from epiformer.data.length_control import ShuffledBetween, shuffle_between
from epiformer.data.shards import load_split
from epiformer.data.spans import span_coordinates
from epiformer.sequence.onehot import one_hot
from tests.helpers import encode_spans_of_fasta, windows_frame


@pytest.fixture
def spans_with_n_runs(tmp_path):
    """Spans over a chromosome with N runs between their elements: (FASTA, windows, train split)."""
    rng = np.random.default_rng(3)
    bases = rng.choice(list("ACGT"), 3000)
    bases[400:460] = "N"
    bases[1500:1520] = "N"
    path = tmp_path / "n.fa"
    path.write_text(">chrA\n" + "".join(bases) + "\n")
    rows = []
    for start in range(10, 900, 45):
        second = start + int(rng.integers(300, 1800))
        enhancer, promoter = (second, start) if rng.random() < 0.5 else (start, second)
        rows.append(("chrA", enhancer, enhancer + 12, "chrA", promoter, promoter + 10))
    windows = windows_frame(rows)
    encode_spans_of_fasta(windows, path, tmp_path / "spans", flank=3, shard_size=5)
    return path, windows, load_split(tmp_path / "spans", "train")


def test_the_control_keeps_elements_length_n_runs_and_composition_and_shuffles_the_between(spans_with_n_runs):
    path, windows, data = spans_with_n_runs
    control = ShuffledBetween(data)
    genome, coordinates = Genome(path), span_coordinates(windows).set_index("pair_id")
    moved = []
    for row in range(len(data)):
        where = coordinates.loc[int(data.pair_id[row])]
        chrom, start, end = data.coordinates(row)
        real = one_hot([genome.fetch(chrom, start, end)])[0]  # the genome's bases, read apart from the package
        shuffled = control.onehot(row)
        assert shuffled.shape == real.shape
        between = slice(data.flank + where.first_end, data.flank + where.second_start)
        outside = np.ones(len(real), bool)
        outside[between] = False
        np.testing.assert_array_equal(shuffled[outside], real[outside])  # elements and flanks untouched
        np.testing.assert_array_equal(shuffled[between].any(axis=1), real[between].any(axis=1))  # N runs in place
        np.testing.assert_array_equal(shuffled[between].sum(axis=0), real[between].sum(axis=0))  # composition
        moved.append((shuffled[between] != real[between]).any(axis=1).mean())
        np.testing.assert_array_equal(control.onehot(row), shuffled)  # a fixed function of the pair
    assert np.mean(moved) > 0.5  # the order is gone: most between bases changed
    with_n = [row for row in range(len(data)) if data.between_n[row] > 0]
    assert with_n  # the fixture's spans do cross N runs


def test_different_pairs_get_different_shuffles_of_the_same_bases():
    bases = np.eye(4, dtype=np.uint8)[np.random.default_rng(0).integers(0, 4, 200)]
    one, other = shuffle_between(bases, 20, 180, (1,)), shuffle_between(bases, 20, 180, (2,))
    assert not np.array_equal(one, other)
    np.testing.assert_array_equal(one[:20], bases[:20])
    np.testing.assert_array_equal(one[180:], bases[180:])


def test_a_control_models_batches_differ_from_the_sequence_models_only_between_the_elements(spans_with_n_runs):
    _, _, data = spans_with_n_runs
    augmentation = {"shuffle": True, "seed": 1, "epoch": 2, "max_shift": 3, "reverse_complement_prob": 0.5}
    real = model_batches("span", data, 8, 900, 1, "sequence", **augmentation)
    control = model_batches("span", data, 8, 900, 1, "shuffled", **augmentation)
    assert isinstance(real, SpanBatches) and isinstance(control, SpanBatches)
    differ = 0
    for a, b in zip(batch_loader(real), batch_loader(control), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in a if key != "span")  # labels, segments, masks, ids
        changed = (a["span"] != b["span"]).any(dim=-1)
        assert not changed[a["segment"] != SEGMENT_IDS["between"]].any()
        differ += int(changed.sum())
    assert differ > 0
    # Loader workers unpickle the control: the same batches.
    for a, b in zip(batch_loader(control), batch_loader(control, workers=2), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_element_models_have_no_length_control(small_shards):
    _, _, shard_dir = small_shards
    with pytest.raises(ValueError, match="span models"):
        model_batches("elements", load_split(shard_dir, "train"), 8, 900, 1, "shuffled")
