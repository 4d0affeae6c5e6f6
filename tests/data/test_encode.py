import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from epiformer.data.encode import encode_shards
from epiformer.data.genome import Genome
from epiformer.data.shards import load_split
from epiformer.sequence.onehot import one_hot, unpack
from tests.helpers import encode_killed_after_two_shards, windows_frame


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
