import numpy as np
import pytest

from epiformer.data.encode import encode_shards
from epiformer.data.shards import ShardError, load_split
from tests.helpers import flip_a_byte


def test_a_corrupt_or_missing_shard_is_named(small_shards):
    _, _, shard_dir = small_shards
    shard = shard_dir / "train" / "shard-00002.safetensors"
    flip_a_byte(shard)
    with pytest.raises(ShardError, match=r"shard-00002\.safetensors.*SHA-256"):
        load_split(shard_dir, "train")
    shard.unlink()
    with pytest.raises(ShardError, match=r"shard-00002\.safetensors.*missing"):
        load_split(shard_dir, "train")


def test_shards_of_several_folders_read_as_one_set_with_their_source(small_shards, tmp_path):
    path, windows, shard_dir = small_shards
    other = windows.iloc[:9].copy()
    encode_shards(other, path, tmp_path / "other", flank=2, shard_size=4)
    pooled = load_split([shard_dir, tmp_path / "other"], "train")
    alone = load_split(shard_dir, "train")
    assert len(pooled) == len(windows) + 9
    assert pooled.source.tolist() == [0] * len(windows) + [1] * 9
    assert pooled.distance.tolist() == windows["distance"].tolist() + other["distance"].tolist()
    rows = np.array([0, len(windows), len(windows) + 8])
    np.testing.assert_array_equal(pooled.packed("enhancer", rows[:1]), alone.packed("enhancer", rows[:1]))
    np.testing.assert_array_equal(pooled.packed("promoter", rows[1:]), alone.packed("promoter", np.array([0, 8])))


def test_folders_with_other_windows_cannot_be_pooled(small_shards, tmp_path):
    path, windows, shard_dir = small_shards
    encode_shards(windows, path, tmp_path / "wider", flank=5, shard_size=4)
    with pytest.raises(ShardError, match="flank .* same windows"):
        load_split([shard_dir, tmp_path / "wider"], "train")
