import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from epiformer.data.encode import encode_shards, one_hot, pack_codes, pack_one_hot, write_bases
from epiformer.data.genome import Genome
from epiformer.data.shards import load_split, unpack
from tests.helpers import encode_killed_after_two_shards, windows_frame


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


@pytest.fixture
def shards(small_fasta, tmp_path):
    path, _ = small_fasta
    rows = [
        (
            "chrA",
            s,
            s + 20,
            "chrB",
            280 - s,
            296 - s,
        )
        for s in range(0, 480, 40)
    ]
    windows = windows_frame(rows)
    windows.loc[windows.index[-3:], "split"] = "test"
    manifest = encode_shards(windows, path, tmp_path / "shards", flank=3, shard_size=4)
    return path, windows, manifest, tmp_path / "shards"


def test_shards_hold_the_genome_with_flanks(shards):
    path, windows, manifest, shard_dir = shards
    genome = Genome(path)
    data = load_split(shard_dir, "train")
    assert (manifest["windows"], manifest["flank"]) == ({"enhancer_width": 20, "promoter_width": 16}, 3)
    assert data.lengths == {"enhancer": 26, "promoter": 22}
    assert [s["rows"] for s in manifest["shards"]] == [4, 4, 1, 3]
    for row, pair_id in enumerate(data.pair_id):
        window = windows.set_index("pair_id").loc[pair_id]
        for element, length in data.lengths.items():
            start, end = window[f"{element}_start"] - 3, window[f"{element}_end"] + 3
            expected = one_hot([genome.fetch(window[f"{element}_chrom"], start, end)])[0]
            np.testing.assert_array_equal(unpack(data.packed(element, np.array([row])), length)[0], expected)
    assert data.label.tolist() == windows.loc[windows.split == "train", "label"].tolist()
    assert data.distance.tolist() == windows.loc[windows.split == "train", "distance"].tolist()


def test_encoding_is_deterministic_and_manifest_lists_inputs(shards, tmp_path):
    path, windows, manifest, shard_dir = shards
    again = encode_shards(windows, path, tmp_path / "again", flank=3, shard_size=4)
    assert [s["sha256"] for s in again["shards"]] == [s["sha256"] for s in manifest["shards"]]
    saved = json.loads((shard_dir / "manifest.json").read_text())
    assert saved["channels"] == "ACGT" and saved["flank"] == 3 and saved["inputs"]["genome_index_sha256"]
    assert not list(shard_dir.rglob(".*tmp*"))  # no temporary files left behind
    tensors = load_file(str(shard_dir / "train" / "shard-00000.safetensors"))
    assert tensors["pair_id"].dtype == np.int64 and tensors["label"].dtype == np.uint8


def test_killed_encode_leaves_no_manifest_and_a_rerun_matches_an_uninterrupted_run(shards, tmp_path):
    path, windows, manifest, _ = shards
    target = tmp_path / "killed"
    run = encode_killed_after_two_shards("epiformer.data.encode", "encode_shards", windows, path, target, shard_size=4)
    assert run.returncode == -9, run.stderr
    assert not (target / "manifest.json").exists() and len(list(target.glob("*/shard-*"))) == 2
    rerun = encode_shards(windows, path, target, flank=3, shard_size=4)
    assert rerun["shards"] == manifest["shards"]
    for entry in manifest["shards"]:
        assert (target / entry["path"]).read_bytes() == (tmp_path / "shards" / entry["path"]).read_bytes()


def test_workers_write_the_same_bytes(shards, tmp_path):
    path, windows, manifest, _ = shards
    parallel = encode_shards(windows, path, tmp_path / "parallel", flank=3, shard_size=4, workers=2)
    assert parallel["shards"] == manifest["shards"]


def test_shards_cost_half_a_byte_per_base_plus_little(small_fasta, tmp_path):
    path, _ = small_fasta
    windows = windows_frame([("chrA", s, s + 1000, "chrB", s, s + 800) for s in range(0, 400, 2)])
    manifest = encode_shards(windows, path, tmp_path / "big", flank=10, shard_size=1000)
    bases = len(windows) * sum(load_split(tmp_path / "big", "train").lengths.values())
    size = sum((tmp_path / "big" / s["path"]).stat().st_size for s in manifest["shards"])
    per_pair = 1 + 8 + 8  # label uint8, pair_id and distance int64
    assert size <= bases / 2 + per_pair * len(windows) + 1024  # half a byte a base, a header of under 1 kB a shard


def test_fast_packing_equals_the_defined_layout():
    rng = np.random.default_rng(0)
    codes = np.frombuffer(b"ACGTNacgtRY-", np.uint8)[rng.integers(0, 12, (50, 64))]
    from epiformer.data.encode import pack_codes

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
