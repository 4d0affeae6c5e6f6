import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file

from epiformer.data.encode import encode_shards
from epiformer.data.encode_genome import build_store
from epiformer.data.shards import ShardError, ShardSet, SpanShardSet, folder_kind, load_split
from epiformer.data.spans import encode_span_shards, span_coordinates
from epiformer.model.configs import ModelConfig
from tests.helpers import (
    bedtools_getfasta,
    encode_killed_after_two_shards,
    flip_a_byte,
    require_bedtools,
    store_of,
    windows_frame,
)

FLANK = 3


@pytest.fixture
def gapped_fasta(tmp_path):
    """chr1 (700 bp, soft-masked stretches, an N run at 300-400) and chr2 (200 bp, with IUPAC codes)."""
    rng = np.random.default_rng(7)
    chr1 = list(rng.choice(list("ACGT"), 700))
    chr1[120:180] = [base.lower() for base in chr1[120:180]]
    chr1[300:400] = ["N"] * 100
    sequences = {"chr1": "".join(chr1), "chr2": "".join(rng.choice(list("ACGTacgtNRY"), 200))}
    path = tmp_path / "gapped.fa"
    with open(path, "w") as handle:
        for name, seq in sequences.items():
            handle.write(f">{name}\n")
            handle.writelines(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))
    return path


def span_windows():
    """Enhancer windows 20 bp, promoter 16 bp: apart both ways, across the N run, overlapping, touching, odd spans."""
    rows = [
        ("chr1", 10, 30, "chr1", 50, 66),  # enhancer first, apart
        ("chr1", 200, 220, "chr1", 40, 56),  # promoter first, apart
        ("chr1", 280, 300, "chr1", 410, 426),  # the between segment is the N run
        ("chr1", 500, 520, "chr1", 510, 526),  # overlapping
        ("chr1", 600, 620, "chr1", 620, 636),  # touching
        ("chr2", 5, 25, "chr2", 150, 166),  # IUPAC codes and lowercase, odd-length span
        ("chr2", 180, 200, "chr2", 101, 117),  # ends at the chromosome end: the right flank is past it
        ("chr1", 1, 21, "chr1", 100, 116),  # the left flank runs past the chromosome start
    ]
    windows = windows_frame(rows)
    windows.loc[windows.index[-3:], "split"] = "test"
    return windows


@pytest.mark.parametrize(
    "enhancer, promoter, expected",
    [
        ((10, 30), (50, 66), (10, 66, 20, 40, True)),  # apart, enhancer first
        ((100, 120), (40, 56), (40, 120, 16, 60, False)),  # apart, promoter first
        ((10, 30), (20, 36), (10, 36, 15, 15, True)),  # overlap [20, 30) cut at its midpoint 25
        ((10, 30), (30, 46), (10, 46, 20, 20, True)),  # touching: no between segment
        ((11, 31), (0, 16), (0, 31, 13, 13, False)),  # overlap [11, 16), 5 bases: the first keeps 2
        ((10, 30), (14, 20), (10, 30, 7, 7, True)),  # promoter inside the enhancer window
        ((10, 30), (10, 26), (10, 30, 8, 8, False)),  # same start: the one ending first is first
    ],
)
def test_span_coordinates_and_segment_boundaries(enhancer, promoter, expected):
    spans = span_coordinates(windows_frame([("chrX", *enhancer, "chrX", *promoter)]))
    row = spans.iloc[0]
    got = (row.span_start, row.span_end, row.first_end, row.second_start, bool(row.enhancer_first))
    assert got == expected
    assert row.distance == row.span_end - row.span_start


def test_every_base_belongs_to_one_segment_of_its_own_window():
    rng = np.random.default_rng(3)
    starts = rng.integers(0, 120, (400, 2))
    windows = windows_frame([("c", e, e + 20, "c", p, p + 16) for e, p in starts])
    spans = span_coordinates(windows)
    for (_, w), s in zip(windows.iterrows(), spans.itertuples()):
        first, second = [(w.enhancer_start, w.enhancer_end), (w.promoter_start, w.promoter_end)][
            :: 1 if s.enhancer_first else -1
        ]
        if second[1] <= first[1]:
            continue  # one window inside the other: the second segment runs on past it (docstring)
        assert 0 <= s.first_end <= s.second_start <= s.distance
        position = s.span_start + np.arange(s.distance)
        segment = np.searchsorted([s.first_end, s.second_start], np.arange(s.distance), side="right")
        in_first = (position >= first[0]) & (position < first[1])
        in_second = (position >= second[0]) & (position < second[1])
        assert in_first[segment == 0].all() and in_second[segment == 2].all()
        assert not (in_first | in_second)[segment == 1].any()
        assert (segment[in_first & ~in_second] == 0).all() and (segment[in_second & ~in_first] == 2).all()


def onehot_of(sequence: str) -> np.ndarray:
    """uint8 [L, 4] of a cleaned sequence, built apart from the package: A, C, G, T channels, N all zeros."""
    return np.array([[base == channel for channel in "ACGT"] for base in sequence], dtype=np.uint8).reshape(-1, 4)


@pytest.fixture
def span_shards(gapped_fasta, tmp_path):
    windows = span_windows()
    manifest = encode_span_shards(windows, store_of(gapped_fasta), tmp_path / "spans", flank=FLANK, shard_size=2)
    return gapped_fasta, windows, manifest, tmp_path / "spans"


def test_stored_spans_equal_bedtools_getfasta(span_shards, tmp_path):
    require_bedtools()
    fasta, windows, manifest, shard_dir = span_shards
    sizes = {"chr1": 700, "chr2": 200}
    for split in ("train", "test"):
        data = SpanShardSet(shard_dir, split)
        frame = windows[windows.split == split].reset_index(drop=True)
        spans = span_coordinates(frame)
        assert data.pair_id.tolist() == frame.pair_id.tolist() and data.label.tolist() == frame.label.tolist()
        assert data.distance.tolist() == (spans.span_end - spans.span_start).tolist()
        for row, s in spans.iterrows():
            w = frame.iloc[row]
            onehot = data.onehot(row)
            assert onehot.shape == (s.distance + 2 * FLANK, 4) == (data.lengths[row], 4)
            span = bedtools_getfasta(fasta, [(s.chrom, s.span_start, s.span_end)], tmp_path)[0]
            np.testing.assert_array_equal(onehot[FLANK:-FLANK], onehot_of(span))
            lo, hi = max(s.span_start - FLANK, 0), min(s.span_end + FLANK, sizes[s.chrom])
            flanked = bedtools_getfasta(fasta, [(s.chrom, lo, hi)], tmp_path)[0]
            inside = slice(lo - (s.span_start - FLANK), hi - (s.span_start - FLANK))
            np.testing.assert_array_equal(onehot[inside], onehot_of(flanked))
            assert onehot.sum() == onehot[inside].sum()  # bases past a chromosome end are N
            for element in ("enhancer", "promoter"):
                start, end = w[f"{element}_start"], w[f"{element}_end"]
                expected = bedtools_getfasta(fasta, [(s.chrom, start, end)], tmp_path)[0]
                at = FLANK + start - s.span_start
                np.testing.assert_array_equal(onehot[at : at + end - start], onehot_of(expected))
            first_end, second_start = data.segments[row]
            assert (first_end, second_start) == (s.first_end, s.second_start)
            if second_start > first_end:  # apart: the segments are the two windows and the gap between them
                segments = [(0, first_end), (first_end, second_start), (second_start, s.distance)]
                first = "enhancer" if s.enhancer_first else "promoter"
                second = "promoter" if s.enhancer_first else "enhancer"
                intervals = [
                    (s.chrom, w[f"{first}_start"], w[f"{first}_end"]),
                    (s.chrom, w[f"{first}_end"], w[f"{second}_start"]),
                    (s.chrom, w[f"{second}_start"], w[f"{second}_end"]),
                ]
                for (a, b), sequence in zip(segments, bedtools_getfasta(fasta, intervals, tmp_path)):
                    np.testing.assert_array_equal(onehot[FLANK + a : FLANK + b], onehot_of(sequence))
                assert data.between_n[row] == bedtools_getfasta(fasta, intervals[1:2], tmp_path)[0].count("N")
    gap = SpanShardSet(shard_dir, "train")
    assert gap.between_n_fraction[2] == 100 / 110 and gap.between_n_fraction[0] == 0.0  # N run 300-400 of 300-410
    assert gap.between_n_fraction[3] == gap.between_n_fraction[4] == 0.0  # overlapping, touching: no between


def test_span_shards_hold_coordinates_and_name_the_store_they_are_cut_from(span_shards, tmp_path):
    fasta, windows, manifest, shard_dir = span_shards
    assert manifest["kind"] == "span" and manifest["format_version"] == 2 and manifest["flank"] == FLANK
    assert manifest["windows"] == {"enhancer_width": 20, "promoter_width": 16}
    assert [(s["split"], s["rows"]) for s in manifest["shards"]] == [("train", 2), ("train", 2), ("train", 1)] + [
        ("test", 2),
        ("test", 1),
    ]
    assert json.loads((shard_dir / "manifest.json").read_text()) == manifest
    assert not list(shard_dir.rglob(".*tmp*"))
    assert (shard_dir / manifest["genome_store"]["path"]).resolve() == store_of(fasta).resolve()
    for entry in manifest["shards"]:
        tensors = load_file(str(shard_dir / entry["path"]))
        assert "bases" not in tensors and entry["bases"] == tensors["lengths"].sum()
        assert (tensors["lengths"] == tensors["distance"] + 2 * FLANK).all()
    spans = span_coordinates(windows[windows.split == "train"])
    train = SpanShardSet(shard_dir, "train")
    assert [train.chrom_names[c] for c in train.chrom] == spans.chrom.tolist()
    assert train.span_start.tolist() == spans.span_start.tolist()
    # Storage: the shards hold no sequence, however long the spans.
    assert sum((shard_dir / e["path"]).stat().st_size for e in manifest["shards"]) < 1000 * len(windows)


def test_shards_moved_with_their_store_still_read_and_a_rebuilt_store_is_refused(span_shards, tmp_path):
    fasta, windows, _, shard_dir = span_shards
    expected = SpanShardSet(shard_dir, "train").onehot(2)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copytree(shard_dir, moved / "spans")
    shutil.copytree(store_of(fasta), moved / store_of(fasta).name)
    shutil.copy(fasta, moved / fasta.name)
    shutil.rmtree(store_of(fasta))  # the store is found beside the shards, where it moved to
    relocated = moved / "spans"
    np.testing.assert_array_equal(SpanShardSet(relocated, "train").onehot(2), expected)
    sequence = (moved / fasta.name).read_text().replace(">chr2", ">chr2x")
    (moved / fasta.name).write_text(sequence)
    (moved / f"{fasta.name}.fai").unlink(missing_ok=True)
    build_store(moved / fasta.name, moved / store_of(fasta).name)  # rebuilt from another genome
    with pytest.raises(ShardError, match="not the one .* was encoded from"):
        SpanShardSet(relocated, "train")
    shutil.rmtree(moved / store_of(fasta).name)
    with pytest.raises(ShardError, match="reads its sequence from a genome store: .*manifest.json is missing"):
        SpanShardSet(relocated, "train")


def test_a_corrupt_genome_store_is_named_when_spans_are_loaded(span_shards):
    fasta, _, _, shard_dir = span_shards
    flip_a_byte(store_of(fasta) / "chrom-00000.u8")
    with pytest.raises(ShardError, match=r"block 0 of chr1 .*corrupt"):
        SpanShardSet(shard_dir, "train")


def test_a_flipped_byte_or_missing_shard_names_the_file(span_shards):
    _, _, _, shard_dir = span_shards
    shard = shard_dir / "train" / "shard-00001.safetensors"
    flip_a_byte(shard)
    with pytest.raises(ShardError, match=r"train/shard-00001\.safetensors.*SHA-256"):
        SpanShardSet(shard_dir, "train")
    SpanShardSet(shard_dir, "test")  # the other split's shards are fine
    shard.unlink()
    with pytest.raises(ShardError, match=r"shard-00001\.safetensors.*missing"):
        SpanShardSet(shard_dir, "train", verify=False)


def test_killed_encode_leaves_no_manifest_and_a_rerun_gives_the_same_bytes(span_shards, tmp_path):
    fasta, windows, manifest, shard_dir = span_shards
    target = tmp_path / "killed"
    run = encode_killed_after_two_shards(
        "epiformer.data.spans", "encode_span_shards", windows, store_of(fasta), target, shard_size=2
    )
    assert run.returncode == -9, run.stderr
    assert not (target / "manifest.json").exists() and len(list(target.glob("*/shard-*"))) == 2
    with pytest.raises(ShardError, match="manifest.json is missing"):
        SpanShardSet(target, "train")
    rerun = encode_span_shards(windows, store_of(fasta), target, flank=FLANK, shard_size=2)
    assert rerun["shards"] == manifest["shards"]
    for entry in manifest["shards"]:
        assert (target / entry["path"]).read_bytes() == (shard_dir / entry["path"]).read_bytes()


def test_workers_write_the_same_bytes(span_shards, tmp_path):
    fasta, windows, manifest, _ = span_shards
    parallel = encode_span_shards(windows, store_of(fasta), tmp_path / "parallel", flank=FLANK, shard_size=2, workers=2)
    assert parallel["shards"] == manifest["shards"]


def test_other_kinds_and_formats_are_refused_clearly(span_shards, tmp_path):
    fasta, windows, _, shard_dir = span_shards
    encode_shards(windows, fasta, tmp_path / "windows_shards", flank=FLANK, shard_size=2)
    with pytest.raises(ShardError, match="'elements' shards .*not span shards"):
        SpanShardSet(tmp_path / "windows_shards", "train")
    # A folder's kind is the input of the models that read it, in ModelConfig.input's own word.
    assert folder_kind(tmp_path / "windows_shards") == ModelConfig().input == "elements"
    assert folder_kind(shard_dir) == ModelConfig(input="span").input
    with pytest.raises(ShardError, match="these are span shards .*SpanShardSet"):
        ShardSet(shard_dir, "train")  # the window-shard reader refuses span shards, naming their kind
    assert isinstance(load_split(shard_dir, "train"), SpanShardSet)  # load_split tells the kinds apart
    manifest = json.loads((shard_dir / "manifest.json").read_text())
    (shard_dir / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ShardError, match="span shard format 99, this epiformer reads 2"):
        SpanShardSet(shard_dir, "train")


def test_a_pair_across_chromosomes_is_refused_before_anything_is_written(gapped_fasta, tmp_path):
    windows = windows_frame([("chr1", 10, 30, "chr1", 50, 66), ("chr1", 10, 30, "chr2", 50, 66)])
    with pytest.raises(ValueError, match=r"1 pairs have their elements on two chromosomes .*1 chr1 chr2"):
        span_coordinates(windows)
    with pytest.raises(ValueError, match="two chromosomes"):
        encode_span_shards(windows, store_of(gapped_fasta), tmp_path / "trans", flank=FLANK, shard_size=2)
    assert not (tmp_path / "trans").exists()
