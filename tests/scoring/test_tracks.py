"""Browser tracks (epiformer.scoring.tracks, epiformer.io.bigwig) on the tiny demo's real pairs files."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from epiformer.cli import main
from epiformer.constants import ELEMENTS
from epiformer.data.chromosomes import GenomeError
from epiformer.data.genome import index_fasta
from epiformer.data.pairs import ELEMENT_COLUMNS, PAIR_COLUMNS, read_pairs
from epiformer.scoring.tracks import (
    BEDPE_EXTRA,
    BEDPE_FIELDS,
    INTERACT_AS,
    INTERACT_FIELDS,
    TracksError,
    browser_score,
    write_tracks,
)
from tests.helpers import copy_workflow, job_counts, snakemake, tiny_config

HEX_COLOR = re.compile(r"#[0-9a-f]{6}")


def write_scores(path, pair_ids, seed=0, labels=None):
    """A scores table as `epiformer predict` writes it (pair_id, score), with a label column if given."""
    scores = pd.DataFrame({"pair_id": pair_ids, "score": np.random.default_rng(seed).random(len(pair_ids))})
    if labels is not None:
        scores.insert(1, "label", labels)
    scores.to_csv(path, sep="\t", index=False, float_format="%.7g")
    return scores


def read_bedpe(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype={"#chrom1": str, "chrom2": str}).rename(columns={"#chrom1": "chrom1"})


def interact_rows(path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("track type=interact ") and lines[1] == "#" + "\t".join(INTERACT_FIELDS)
    return [line.split("\t") for line in lines[2:]]


@pytest.fixture(params=["demo_a", "demo_b"], ids=["targetfinder_csv", "bedpe"])
def demo_tracks(request, tiny_demo, tmp_path):
    """Tracks of every third pair of a tiny demo cell line (demo_a: TargetFinder CSV, demo_b: BEDPE)."""
    pairs = read_pairs(tiny_demo[request.param])
    chosen = pairs["pair_id"].to_numpy()[::3]
    scores = write_scores(tmp_path / "scores.tsv", chosen, labels=pairs["label"].to_numpy()[::3])
    out = {"bedpe": tmp_path / "t.bedpe", "interact": tmp_path / "t.interact.bed"}
    summary = write_tracks(tiny_demo[request.param], tmp_path / "scores.tsv", out["bedpe"], out["interact"], None, "x")
    return pairs, scores, out, summary


def test_bedpe_has_the_pairs_file_coordinates_and_reads_back_as_pairs(demo_tracks):
    pairs, scores, out, summary = demo_tracks
    assert pairs.attrs["format"] in ("targetfinder", "bedpe") and summary["scored"] == len(scores)
    bedpe = read_bedpe(out["bedpe"])
    assert list(bedpe.columns) == BEDPE_FIELDS + BEDPE_EXTRA
    expected = pairs.set_index("pair_id").loc[scores["pair_id"]]
    for field, column in zip(BEDPE_FIELDS[:6], ELEMENT_COLUMNS):
        assert bedpe[field].tolist() == expected[column].tolist(), field
    assert bedpe["name"].tolist() == [f"pair_{i}" for i in scores["pair_id"]]
    np.testing.assert_allclose(bedpe["probability"], scores["score"], rtol=1e-6)
    assert (bedpe["score"] == browser_score(scores["score"])).all() and bedpe["label"].tolist() == scores[
        "label"
    ].tolist()
    again = read_pairs(out["bedpe"])  # column 11 is the label: the track is a pairs file again
    pd.testing.assert_frame_equal(
        again[PAIR_COLUMNS].drop(columns="pair_id"), expected.reset_index()[PAIR_COLUMNS].drop(columns="pair_id")
    )


def test_interact_rows_have_18_typed_fields_spanning_both_elements(demo_tracks):
    pairs, scores, out, _ = demo_tracks
    rows = interact_rows(out["interact"])
    assert len(rows) == len(scores) and all(len(row) == 18 for row in rows)  # the demo has no trans pairs
    table = pd.DataFrame(rows, columns=INTERACT_FIELDS)
    for field in ("chromStart", "chromEnd", "score", "sourceStart", "sourceEnd", "targetStart", "targetEnd"):
        table[field] = table[field].astype(np.int64)
    table["value"] = table["value"].astype(float)
    assert table["score"].between(0, 1000).all() and table["value"].between(0, 1).all()
    assert table["color"].str.fullmatch(HEX_COLOR).all() and (table["exp"] == "x").all()
    assert (table["chromStart"] < table["chromEnd"]).all()
    assert list(zip(table["chrom"], table["chromStart"])) == sorted(zip(table["chrom"], table["chromStart"]))
    by_id = pairs.set_index("pair_id").loc[table["name"].str.removeprefix("pair_").astype(int)]
    for role, element in zip(("source", "target"), ELEMENTS):  # enhancer -> promoter
        assert (table[f"{role}Chrom"].to_numpy() == by_id[f"{element}_chrom"].to_numpy()).all()
        assert (table[f"{role}Start"].to_numpy() == by_id[f"{element}_start"].to_numpy()).all()
        assert (table[f"{role}End"].to_numpy() == by_id[f"{element}_end"].to_numpy()).all()
    assert (table["chromStart"] == table[["sourceStart", "targetStart"]].min(axis=1)).all()
    assert (table["chromEnd"] == table[["sourceEnd", "targetEnd"]].max(axis=1)).all()


PAIRS_CSV = """enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label,probability
chr1,100,300,chr1,5000,5200,1,x
chr1,9000,9100,chr1,3000,3300,0,x
chr2,10,50,chr1,700,800,,x
chr1,400,500,chr1,450,600,1,x
"""  # an extra column that the tracks' own columns must not take from


@pytest.fixture
def small_pairs(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text(PAIRS_CSV)
    return path


def test_a_trans_pair_is_one_interact_row_on_each_chromosome(small_pairs, tmp_path, caplog):
    scores = write_scores(tmp_path / "s.tsv", [0, 1, 2, 3])
    with caplog.at_level(logging.INFO, logger="epiformer.scoring.tracks"):
        summary = write_tracks(small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed")
    assert summary["trans"] == 1 and "1 trans pair(s)" in caplog.text
    rows = [row for row in interact_rows(tmp_path / "o.interact.bed") if row[3] == "pair_2"]
    assert [row[:3] for row in rows] == [["chr1", "700", "800"], ["chr2", "10", "50"]]
    assert all(row[8:11] == ["chr2", "10", "50"] and row[13:16] == ["chr1", "700", "800"] for row in rows)
    bedpe = read_bedpe(tmp_path / "o.bedpe")
    assert bedpe["label"].tolist() == ["1", "0", ".", "1"]  # the pairs file's labels; unknown is `.`
    np.testing.assert_allclose(bedpe["probability"], scores["score"], rtol=1e-6)


def test_browser_score_is_monotone_from_0_to_1000():
    probabilities = np.sort(np.random.default_rng(3).random(1000))
    scores = browser_score(np.concatenate([[0.0], probabilities, [1.0]]))
    assert scores[0] == 0 and scores[-1] == 1000 and (np.diff(scores) >= 0).all()
    assert scores.dtype == np.int64 and browser_score([0.4994, 0.5, 0.5006]).tolist() == [499, 500, 501]


def test_bedtools_reads_the_bedpe_and_the_interact_file(small_pairs, tmp_path):
    if shutil.which("bedtools") is None:
        pytest.skip("bedtools is not installed (apt-get install bedtools)")
    write_scores(tmp_path / "s.tsv", [0, 1, 2, 3])
    write_tracks(small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed")
    (tmp_path / "query.bed").write_text("chr1\t5100\t5150\tq\n")  # inside pair_0's promoter only
    run = subprocess.run(
        ["bedtools", "pairtobed", "-a", tmp_path / "o.bedpe", "-b", tmp_path / "query.bed"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [line.split("\t")[6] for line in run.stdout.splitlines()] == ["pair_0"]
    run = subprocess.run(
        ["bedtools", "intersect", "-u", "-a", tmp_path / "o.interact.bed", "-b", tmp_path / "query.bed"],
        capture_output=True,
        text=True,
        check=True,
    )  # the interact row of a cis pair spans both elements and all between: pair_1's, 3000-9100, too
    assert [line.split("\t")[3] for line in run.stdout.splitlines()] == ["pair_0", "pair_1"]


@pytest.mark.parametrize(
    "scores, message",
    [
        ("pair_id\tscore\n0\t0.5\n7\t0.5\n", r"s.tsv, line 3: pair_id 7 is not a pair of .*pairs.csv, which has 4"),
        ("pair_id\tscore\n0\t0.5\n0\t0.6\n", r"s.tsv, line 3: pair_id is 0; it must be listed once"),
        ("pair_id\tscore\n0\t1.5\n", r"s.tsv, line 2: score is '1.5'; it must be a probability between 0 and 1"),
        ("pair_id\tscore\n0\tNA\n", r"s.tsv, line 2: score is 'NA'"),
        ("pair_id\tprobability\n0\t0.5\n", r"s.tsv, line 1: no score column"),
        (
            "pair_id\tlabel\tscore\n0\t0\t0.5\n",
            r"pairs.csv, line 2: label 1 of pair_id 0, but .*s.tsv gives it label 0",
        ),
        ("", r"s.tsv is empty"),
    ],
)
def test_bad_scores_fail_naming_file_line_and_fix_and_write_nothing(small_pairs, tmp_path, scores, message):
    (tmp_path / "s.tsv").write_text(scores)
    (tmp_path / "o.bedpe").write_text("an earlier run\n")
    with pytest.raises(TracksError, match=message):
        write_tracks(small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed")
    assert (tmp_path / "o.bedpe").read_text() == "an earlier run\n" and not (tmp_path / "o.interact.bed").exists()
    assert not [path for path in tmp_path.iterdir() if ".tmp-" in path.name]


def test_a_genome_checks_coordinates_and_bigInteract_is_skipped_with_the_command(small_pairs, tmp_path, caplog):
    write_scores(tmp_path / "s.tsv", [0, 1, 2, 3])
    (tmp_path / "g.sizes").write_text("chr1\t10000\nchr2\t40\n")  # chr2 ends before pair 2's enhancer does
    with pytest.raises(
        GenomeError, match=r"pairs.csv, line 4: enhancer_end 50 is past the end of chr2 \(40 bp\) in .*g.sizes"
    ):
        write_tracks(
            small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tmp_path / "g.sizes"
        )
    with pytest.raises(TracksError, match=r"samtools faidx .*genome.fa"):
        write_tracks(
            small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.i.bed", tmp_path / "genome.fa"
        )
    (tmp_path / "g.sizes").write_text("chr1\t10000\nchr2\t100\n")
    if shutil.which("bedToBigBed") is not None:
        pytest.skip("bedToBigBed is on PATH: the skip message is not shown (test_big_interact covers the tool)")
    with caplog.at_level(logging.INFO, logger="epiformer.scoring.tracks"):
        summary = write_tracks(
            small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tmp_path / "g.sizes"
        )
    assert "big_interact" not in summary and not (tmp_path / "o.interact.bb").exists()
    assert "bigInteract skipped" in caplog.text and "conda install -c bioconda ucsc-bedtobigbed" in caplog.text
    assert f"-as={tmp_path / 'o.interact.as'} -type=bed5+13" in caplog.text
    assert (tmp_path / "o.interact.as").read_text() == INTERACT_AS


def test_big_interact(small_pairs, tmp_path):
    """The real UCSC bedToBigBed, read back with pyBigWig (it reads bigBed too)."""
    if shutil.which("bedToBigBed") is None:
        pytest.skip("UCSC bedToBigBed is not on PATH (conda install -c bioconda ucsc-bedtobigbed)")
    import pyBigWig

    write_scores(tmp_path / "s.tsv", [0, 1, 2, 3])
    (tmp_path / "g.sizes").write_text("chr1\t10000\nchr2\t100\n")
    summary = write_tracks(
        small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tmp_path / "g.sizes"
    )
    big = pyBigWig.open(summary["big_interact"])
    assert big.isBigBed() and big.chroms() == {"chr1": 10000, "chr2": 100}
    assert len(big.entries("chr1", 0, 10000)) == 4 and len(big.entries("chr2", 0, 100)) == 1


def test_bedtobigbed_gets_sorted_bed5_13_and_two_column_sizes(small_pairs, tmp_path, monkeypatch):
    """A stand-in bedToBigBed on PATH records what it is given (the real tool: test_big_interact)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "bedToBigBed").write_text(
        '#!/bin/sh\ncp "$3" "$(dirname "$0")/input.bed"; cp "$4" "$(dirname "$0")/sizes"; echo "$1 $2" > "$5"\n'
    )
    (tools / "bedToBigBed").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    write_scores(tmp_path / "s.tsv", [0, 1, 2, 3])
    (tmp_path / "g.fa.fai").write_text("chr1\t10000\t6\t60\t61\nchr2\t100\t10180\t60\t61\n")
    summary = write_tracks(
        small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tmp_path / "g.fa"
    )
    assert (tmp_path / "o.interact.bb").read_text() == f"-as={tmp_path / 'o.interact.as'} -type=bed5+13\n"
    assert summary["big_interact"] == str(tmp_path / "o.interact.bb")
    assert (tools / "sizes").read_text() == "chr1\t10000\nchr2\t100\n"
    rows = [line.split("\t") for line in (tools / "input.bed").read_text().splitlines()]
    assert len(rows) == 5 and all(len(row) == 18 for row in rows)
    assert [(row[0], int(row[1])) for row in rows] == sorted((row[0], int(row[1])) for row in rows)

    (tools / "bedToBigBed").write_text("#!/bin/sh\necho 'chr9 not in chrom.sizes' >&2; exit 255\n")
    with pytest.raises(TracksError, match="bedToBigBed failed making .*o.interact.bb: chr9 not in chrom.sizes"):
        write_tracks(
            small_pairs, tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tmp_path / "g.fa"
        )
    assert (tmp_path / "o.interact.bb").read_text().startswith("-as=")  # the earlier file, untouched


def test_cli_writes_the_tracks_and_exits_1_on_bad_input(small_pairs, tmp_path, capsys):
    write_scores(tmp_path / "s.tsv", [1, 3])
    prefix = tmp_path / "out" / "tracks"
    argv = ["tracks", "--pairs", str(small_pairs), "--scores", str(tmp_path / "s.tsv"), "--out-prefix", str(prefix)]
    assert main([*argv, "--name", "my run", "--no-track-line"]) == 0
    assert len(read_bedpe(f"{prefix}.bedpe")) == 2
    lines = (tmp_path / "out" / "tracks.interact.bed").read_text().splitlines()
    assert lines[0].startswith("#chrom\t") and all(line.split("\t")[6] == "my_run" for line in lines[1:])
    (tmp_path / "s.tsv").write_text("pair_id\tscore\n99\t0.5\n")
    assert main(argv) == 1
    assert "pair_id 99 is not a pair" in capsys.readouterr().err
    missing = ["tracks", "--pairs", str(tmp_path / "nope.csv"), *argv[3:]]  # points at the option, not a sample sheet
    assert main(missing) == 1
    error = capsys.readouterr().err
    assert "nope.csv" in error and "--pairs" in error and "sample sheet" not in error


def test_the_workflow_makes_tracks_for_every_model_baseline_and_pooled_model(tmp_path):
    config = tiny_config()
    config["models"]["linear_pooled"] = {**config["models"]["linear"], "pooled": True}
    folder = copy_workflow(tmp_path / "workflow", config)
    dry = snakemake(folder, "-n", "results/demo_a/linear_pooled/predictions.bedpe")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "results/pooled/linear_pooled/model.safetensors" in dry.stdout  # its per-cell predictions.tsv
    everything = snakemake(folder, "-n")
    counts = job_counts(everything.stdout)
    # cell lines x (linear, softmax, linear_pooled + 4 baselines + the 4 fitted pooled, beside the pooled model)
    assert counts["tracks"] == 2 * (3 + 4 + 4)
    assert counts["pooled_baseline"] == 4  # one job a baseline scores both cell lines


def test_the_demo_pairs_lie_within_the_demo_genome(tiny_demo, tmp_path):
    index_fasta(tiny_demo["genome"])
    pairs = read_pairs(tiny_demo["demo_b"])
    write_scores(tmp_path / "s.tsv", pairs["pair_id"])
    summary = write_tracks(
        tiny_demo["demo_b"], tmp_path / "s.tsv", tmp_path / "o.bedpe", tmp_path / "o.interact.bed", tiny_demo["genome"]
    )
    assert summary["scored"] == len(pairs) and (tmp_path / "o.interact.as").read_text() == INTERACT_AS


def test_the_workflow_writes_tracks_of_every_predictions_tsv(finished):
    samples = pd.read_csv(finished / "config" / "samples.tsv", sep="\t")
    for cell, pairs_path in zip(samples["cell_line"], samples["pairs"]):
        pairs = read_pairs(finished / pairs_path).set_index("pair_id")
        for name in ("linear", "softmax", "distance", "kmer", "distance_kmer", "propensity"):
            folder = finished / "results" / cell / name
            predictions = pd.read_csv(folder / "predictions.tsv", sep="\t")
            bedpe = read_bedpe(folder / "predictions.bedpe")
            assert bedpe["name"].tolist() == [f"pair_{i}" for i in predictions["pair_id"]]
            assert bedpe["label"].astype(int).tolist() == predictions["label"].tolist()
            assert bedpe["start1"].tolist() == pairs.loc[predictions["pair_id"], "enhancer_start"].tolist()
            rows = interact_rows(folder / "predictions.interact.bed")
            assert len(rows) == len(predictions) and {row[6] for row in rows} == {f"{cell}_{name}"}
