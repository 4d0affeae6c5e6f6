"""`epiformer predict`: scoring new pairs with a finished run's model, the way a user runs it."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from epiformer.data.genome import Genome, GenomeError
from epiformer.data.pairs import PairsError, read_pairs
from epiformer.data.shards import load_split
from epiformer.data.windows import WindowSpec, place_pair_windows, window_spec_for
from epiformer.inference.trained_model import ModelError, load_trained_model, predict_split
from epiformer.scoring.new_pairs import score_windows, unscored_path_for
from epiformer.scoring.predict import predict_pairs

CLI = [sys.executable, "-m", "epiformer.cli"]
# The windows settings of tiny_config() (tests/helpers.py), which the `finished` run trained with.
TRAINED_WINDOWS = {
    "enhancer_width": 64,
    "promoter_width": 48,
    "edge": "shift",
    "allow_trans": False,
    "max_n_fraction": 0.5,
    "max_span": None,  # no model of that run reads spans: the windows stage dropped no pair for its span
    "tss_annotation": "",  # the pairs' own TSSs
}
DROP_REASONS = {
    f"{element}_window_{why}" for element in ("enhancer", "promoter") for why in ("off_chromosome", "mostly_n")
}
CASES = {"demo_a": ("linear", "demo_a.pairs.csv"), "demo_b": ("softmax", "demo_b.pairs.bedpe")}


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300, check=False)


def inputs(finished, cell: str) -> dict:
    model, pairs = CASES[cell]
    return {
        "model_dir": finished / "results" / cell / model,
        "genome_path": finished / "resources/demo/genome.fa",
        "pairs_path": finished / "resources/demo" / pairs,
    }


def read_tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t")


@pytest.mark.parametrize("cell", list(CASES))
def test_cli_reproduces_the_workflow_test_predictions(finished, tmp_path, cell):
    given = inputs(finished, cell)
    run = run_cli(
        "predict",
        "--model",
        given["model_dir"],
        "--genome",
        given["genome_path"],
        "--pairs",
        given["pairs_path"],
        "--out",
        tmp_path / "scores.tsv",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    scores = read_tsv(tmp_path / "scores.tsv")
    assert list(scores.columns) == ["pair_id", "score"] and scores["pair_id"].is_monotonic_increasing
    workflow = read_tsv(given["model_dir"] / "predictions.tsv")
    both = workflow.merge(scores, on="pair_id", suffixes=("_workflow", "_predict"), validate="one_to_one")
    assert len(both) == len(workflow) > 20
    assert np.abs(both["score_workflow"] - both["score_predict"]).max() <= 1e-6
    # Every pair the windows stage kept is scored; the pairs it dropped are listed with a reason.
    windows = read_tsv(finished / "results" / cell / "windows.tsv")
    assert set(windows["pair_id"]) <= set(scores["pair_id"])
    unscored = read_tsv(tmp_path / "scores.unscored.tsv")
    assert list(unscored.columns) == ["pair_id", "line", "reason"]
    n_pairs = len(read_pairs(given["pairs_path"]))
    assert len(scores) + len(unscored) == n_pairs and not set(scores["pair_id"]) & set(unscored["pair_id"])
    assert set(unscored["reason"]) <= DROP_REASONS and not set(unscored["pair_id"]) & set(windows["pair_id"])
    assert "Scored" in run.stderr


def test_scores_equal_the_evaluation_path_before_rounding(finished):
    """Unrounded: predict's windows and encoding give the evaluation's scores on the test shards."""
    given = inputs(finished, "demo_a")
    model, description = load_trained_model(given["model_dir"])
    pairs = read_pairs(given["pairs_path"], require_label=False)
    with Genome(given["genome_path"]) as genome:
        windows, unscored = place_pair_windows(pairs, genome, window_spec_for(description))
        test_ids = read_tsv(finished / "results/demo_a/windows.tsv").query("split == 'test'")["pair_id"]
        scores = score_windows(model, genome, windows[windows["pair_id"].isin(test_ids)])
    expected, _, ids = predict_split(
        model, load_split(finished / "results/demo_a/shards", "test"), 256, torch.device("cpu")
    )
    np.testing.assert_array_equal(scores["pair_id"], ids)
    np.testing.assert_allclose(scores["score"], expected, rtol=0, atol=1e-6)
    assert not set(unscored["pair_id"]) & set(test_ids)


def test_model_json_carries_the_window_settings_used_at_training(finished):
    description = json.loads((finished / "results/demo_a/linear/model.json").read_text())
    assert description["windows"] == TRAINED_WINDOWS
    assert window_spec_for(description) == WindowSpec(**TRAINED_WINDOWS)


def test_window_settings_come_from_the_model_and_overrides_are_logged(caplog):
    windows = {**TRAINED_WINDOWS, "enhancer_width": 100, "promoter_width": 80, "edge": "drop", "max_n_fraction": 0.2}
    description = {"windows": windows}
    assert window_spec_for(description) == WindowSpec(100, 80, edge="drop", max_n_fraction=0.2)
    with caplog.at_level(logging.WARNING):
        assert window_spec_for(description, edge="shift").edge == "shift"
    assert "trained with edge=drop" in caplog.text


def test_an_element_model_of_a_run_with_span_models_scores_pairs_of_any_span():
    """Its windows stage dropped pairs without a span for the span models' sake; scoring drops none for it."""
    windows = {**TRAINED_WINDOWS, "enhancer_width": 100, "promoter_width": 80, "max_span": 5_000}
    assert window_spec_for({"windows": windows}) == WindowSpec(100, 80, max_span=None)


def labelled_rows(finished, n=40) -> pd.DataFrame:
    return pd.read_csv(finished / "resources/demo/demo_a.pairs.csv").head(n)


@pytest.mark.parametrize("fmt", ["csv without label", "csv with unknown labels", "bedpe with 6 columns"])
def test_labels_are_optional(finished, tmp_path, fmt):
    rows = labelled_rows(finished)
    given = inputs(finished, "demo_a")
    labelled = tmp_path / "labelled.csv"
    rows.to_csv(labelled, index=False)
    if fmt == "csv without label":
        pairs = tmp_path / "pairs.csv"
        rows.drop(columns="label").to_csv(pairs, index=False)
    elif fmt == "csv with unknown labels":
        pairs = tmp_path / "pairs.csv"
        rows.assign(label=["", ".", "NA", "?"] * (len(rows) // 4)).to_csv(pairs, index=False)
    else:
        pairs = tmp_path / "pairs.bedpe"
        columns = [f"{e}_{f}" for e in ("enhancer", "promoter") for f in ("chrom", "start", "end")]
        rows[columns].to_csv(pairs, sep="\t", header=False, index=False)
    summary = predict_pairs(given["model_dir"], given["genome_path"], pairs, tmp_path / "scores.tsv")
    predict_pairs(given["model_dir"], given["genome_path"], labelled, tmp_path / "labelled.tsv")
    assert summary["scored"] == len(rows)
    pd.testing.assert_frame_equal(read_tsv(tmp_path / "scores.tsv"), read_tsv(tmp_path / "labelled.tsv"))
    assert (read_pairs(pairs, require_label=False)["label"] == -1).all()
    with pytest.raises(PairsError, match="label"):
        read_pairs(pairs)  # training still requires labels


@pytest.fixture
def small_genome(tmp_path):
    """chr1 and chr2 of 1,000 bp each; chr1 has an N run at 400-500."""
    rng = np.random.default_rng(5)
    path = tmp_path / "small.fa"
    with open(path, "w") as handle:
        for name in ("chr1", "chr2"):
            seq = list(rng.choice(list("ACGT"), 1000))
            if name == "chr1":
                seq[400:500] = "N" * 100
            text = "".join(seq)
            handle.write(f">{name}\n" + "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60)))
    return path


def model_copy(finished, tmp_path, **windows) -> object:
    folder = tmp_path / "model"
    shutil.copytree(finished / "results/demo_a/linear", folder)
    description = json.loads((folder / "model.json").read_text())
    description["windows"].update(windows)
    (folder / "model.json").write_text(json.dumps(description))
    return folder


HEADER = "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end\n"
SMALL_ROWS = [
    "chr1,100,140,chr1,700,740",  # line 2: scored
    "chr1,980,1000,chr1,700,740",  # line 3: enhancer window crosses the chromosome end
    "chr1,430,470,chr1,700,740",  # line 4: enhancer window (418-482) is all N
    "chr1,100,140,chr2,700,740",  # line 5: trans
    "chr1,100,140,chr1,700,740",  # line 6: duplicate of line 2, scored under its own pair_id
    "chr2,200,260,chr2,10,30",  # line 7: promoter window crosses the chromosome start
]


@pytest.mark.parametrize("edge", ["shift", "drop"])
def test_pairs_that_cannot_be_scored_are_listed_with_line_and_reason(finished, tmp_path, small_genome, edge):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(HEADER + "\n".join(SMALL_ROWS) + "\n")
    model_dir = model_copy(finished, tmp_path, edge=edge)
    summary = predict_pairs(model_dir, small_genome, pairs, tmp_path / "out" / "scores.tsv")
    scores = read_tsv(tmp_path / "out" / "scores.tsv")
    unscored = read_tsv(tmp_path / "out" / "scores.unscored.tsv")
    expected = [(1, 3, "enhancer_window_off_chromosome")] if edge == "drop" else []
    expected += [(2, 4, "enhancer_window_mostly_n"), (3, 5, "trans_pair")]
    expected += [(5, 7, "promoter_window_off_chromosome")] if edge == "drop" else []
    assert list(unscored.itertuples(index=False, name=None)) == expected
    assert scores["pair_id"].tolist() == ([0, 4] if edge == "drop" else [0, 1, 4, 5])
    duplicate = scores.set_index("pair_id").loc[[0, 4], "score"]
    assert duplicate.iloc[0] == pytest.approx(duplicate.iloc[1], abs=1e-6)
    assert summary["unscored"]["trans_pair"] == 1
    allowed = predict_pairs(
        model_dir, small_genome, pairs, tmp_path / "trans.tsv", allow_trans=True, max_n_fraction=1.0
    )
    assert allowed["unscored"] == (
        {} if edge == "shift" else {"enhancer_window_off_chromosome": 1, "promoter_window_off_chromosome": 1}
    )


def test_unscored_path_sits_beside_the_scores(tmp_path):
    assert unscored_path_for(tmp_path / "scores.tsv") == tmp_path / "scores.unscored.tsv"
    assert unscored_path_for("out/scores") == unscored_path_for("out/scores.tsv")


def broken_model(finished, tmp_path, case):
    folder = tmp_path / "broken"
    shutil.copytree(finished / "results/demo_a/linear", folder)
    if case == "no weights":
        (folder / "model.safetensors").unlink()
    elif case == "not json":
        (folder / "model.json").write_text("{ this is not json")
    elif case == "no windows":
        description = json.loads((folder / "model.json").read_text())
        del description["windows"]
        (folder / "model.json").write_text(json.dumps(description))
    elif case == "weights of another model":
        description = json.loads((folder / "model.json").read_text())
        description["model"]["d_model"] = 32
        (folder / "model.json").write_text(json.dumps(description))
    elif case == "truncated weights":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    return folder


MODEL_CASES = {
    "missing folder": ["nowhere", "Model folder not found", "results/<cell>/<model>"],
    "cell folder": ["demo_a has no model.json", "linear, softmax", "--model"],
    "weights file": ["is a file", "linear"],
    "no weights": ["no model.safetensors"],
    "not json": ["model.json is not a model", "Re-run training"],
    "no windows": ["model.json is not a model"],
    "weights of another model": ["does not load", "belong together"],
    "truncated weights": ["does not load"],
}


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_a_wrong_model_folder_is_named_with_the_fix(finished, tmp_path, case):
    fragments = MODEL_CASES[case]
    model_dir = {
        "missing folder": tmp_path / "nowhere",
        "cell folder": finished / "results/demo_a",
        "weights file": finished / "results/demo_a/linear/model.safetensors",
    }.get(case)
    model_dir = model_dir or broken_model(finished, tmp_path, case)
    given = inputs(finished, "demo_a")
    with pytest.raises(ModelError) as raised:
        predict_pairs(model_dir, given["genome_path"], given["pairs_path"], tmp_path / "scores.tsv")
    for fragment in fragments:
        assert fragment in str(raised.value), (fragment, str(raised.value))
    assert not (tmp_path / "scores.tsv").exists()


def fasta(path, chromosomes: dict[str, int]):
    rng = np.random.default_rng(0)
    records = [f">{name}\n" + "".join(rng.choice(list("ACGT"), n)) + "\n" for name, n in chromosomes.items()]
    path.write_text("".join(records))
    return path


def pairs_file(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "pairs.csv"
    path.write_text(header + "".join(row + "\n" for row in rows))
    return path


BAD_INPUTS = {
    "genome missing": (
        lambda tmp: tmp / "no.fa",
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0]),
        GenomeError,
        ["Genome FASTA not found", "no.fa"],
    ),
    "chr prefix differs": (
        lambda tmp: fasta(tmp / "ensembl.fa", {"1": 2000, "2": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0]),
        PairsError,
        ["line 2", "'chr1'", "names it '1'", "only the `chr` prefix differs"],
    ),
    "genome of another naming": (
        lambda tmp: fasta(tmp / "refseq.fa", {"NC_000001.11": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0]),
        GenomeError,
        ["None of the chromosomes", "different builds or naming schemes"],
    ),
    "genome lacks a chromosome": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0], "chr7,10,50,chr7,300,340"),
        PairsError,
        ["line 3", "'chr7'", "not in genome"],
    ),
    "coordinates of another build": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0], "chr1,100,140,chr1,2500,2540"),
        GenomeError,
        ["line 3", "promoter_end 2540", "chr1 (2,000 bp)", "another build"],
    ),
    "non-integer coordinate": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0], "chr1,1e2x,140,chr1,700,740"),
        PairsError,
        ["line 3", "'1e2x'", "non-negative integer"],
    ),
    "missing column": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: pairs_file(tmp, SMALL_ROWS[0], header=HEADER.replace("_end\n", "_stop\n")),
        PairsError,
        ["line 1", "missing column(s) promoter_end"],
    ),
    "empty pairs": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: pairs_file(tmp),
        PairsError,
        ["no pairs"],
    ),
    "pairs missing": (
        lambda tmp: fasta(tmp / "g.fa", {"chr1": 2000}),
        lambda tmp: tmp / "none.csv",
        PairsError,
        ["not found", "none.csv"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_genome_or_pairs_stop_with_the_file_and_fix(finished, tmp_path, case):
    make_genome, make_pairs, error, fragments = BAD_INPUTS[case]
    genome, pairs = make_genome(tmp_path), make_pairs(tmp_path)
    with pytest.raises(error) as raised:
        predict_pairs(inputs(finished, "demo_a")["model_dir"], genome, pairs, tmp_path / "out" / "scores.tsv")
    for fragment in fragments:
        assert fragment in str(raised.value), (fragment, str(raised.value))
    assert not (tmp_path / "out").exists()


def test_cli_reports_an_input_error_in_one_line_and_exits_1(finished, tmp_path):
    given = inputs(finished, "demo_a")
    run = run_cli(
        "predict",
        "--model",
        finished / "results/demo_a",
        "--genome",
        given["genome_path"],
        "--pairs",
        given["pairs_path"],
        "--out",
        tmp_path / "scores.tsv",
    )
    assert run.returncode == 1, run.stderr
    assert "linear, softmax" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "scores.tsv").exists()


def test_help_describes_the_commands():
    top = run_cli("--help")
    assert top.returncode == 0 and "predict" in top.stdout
    predict = run_cli("predict", "--help")
    for option in ("--model", "--genome", "--pairs", "--out", "--unscored", "--edge", "--max-n-fraction", "example"):
        assert option in predict.stdout
    usage = run_cli("predict", "--model", "m")
    assert usage.returncode == 2 and "required" in usage.stderr
