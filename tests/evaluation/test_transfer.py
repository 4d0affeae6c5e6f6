"""epiformer.evaluation.transfer: every trained model scored on every cell line's test split."""

import re

import pandas as pd
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.data.shards import load_split
from epiformer.data.splits import SplitSpec
from epiformer.evaluation.evaluate import evaluate_model
from epiformer.evaluation.transfer import transfer_table, write_transfer
from epiformer.inference.trained_model import load_trained_model, predict_split
from tests.helpers import windows_and_shards

CELLS = ("demo_a", "demo_b")


def models_and_shards(trained_cells) -> tuple[dict, dict]:
    return (
        {cell: trained_cells[cell] / "linear" for cell in CELLS},
        {cell: trained_cells[cell] / "shards" for cell in CELLS},
    )


def test_each_row_is_scikit_learn_on_that_models_scores_of_that_cell_lines_test_split(trained_cells):
    models, shards = models_and_shards(trained_cells)
    table = transfer_table(models, shards)
    assert list(table.columns) == ["train_cell", "test_cell", "auroc", "auprc", "n_test", "positives"]
    assert list(zip(table["train_cell"], table["test_cell"])) == [(a, b) for a in CELLS for b in CELLS]
    for row in table.itertuples():
        model, _ = load_trained_model(models[row.train_cell])
        scores, labels, _ = predict_split(model, load_split(shards[row.test_cell], "test"), 256, torch.device("cpu"))
        assert row.auroc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
        assert row.auprc == pytest.approx(average_precision_score(labels, scores), abs=1e-12)
        windows = pd.read_csv(trained_cells[row.test_cell] / "windows.tsv", sep="\t").query("split == 'test'")
        assert (row.n_test, row.positives) == (len(windows), windows["label"].sum())
    by_pair = table.set_index(["train_cell", "test_cell"])
    for train_cell, other in zip(CELLS, CELLS[::-1]):  # another model or other pairs: other values
        assert by_pair.loc[(train_cell, other), "auroc"] != by_pair.loc[(train_cell, train_cell), "auroc"]
        assert by_pair.loc[(other, train_cell), "auroc"] != by_pair.loc[(train_cell, train_cell), "auroc"]


def test_the_diagonal_equals_each_models_own_evaluation(trained_cells, tmp_path):
    models, shards = models_and_shards(trained_cells)
    table = transfer_table(models, shards).set_index(["train_cell", "test_cell"])
    for cell in CELLS:
        metrics = evaluate_model(models[cell], shards[cell], tmp_path / f"{cell}.tsv", tmp_path / f"{cell}.json", 10)
        assert table.loc[(cell, cell), "auroc"] == pytest.approx(metrics["auroc"], abs=1e-12)
        assert table.loc[(cell, cell), "auprc"] == pytest.approx(metrics["auprc"], abs=1e-12)
        assert table.loc[(cell, cell), "n_test"] == metrics["n_test"]


def test_the_table_is_written_exactly(trained_cells, tmp_path):
    models, shards = models_and_shards(trained_cells)
    out = tmp_path / "transfer" / "linear.tsv"
    table = write_transfer(models, shards, out)
    written = pd.read_csv(out, sep="\t")
    pd.testing.assert_frame_equal(
        written[["train_cell", "test_cell", "n_test", "positives"]], table.iloc[:, [0, 1, 4, 5]]
    )
    for metric in ("auroc", "auprc"):
        assert written[metric].tolist() == table[metric].tolist()  # each value reads back as computed
    assert sorted(path.name for path in out.parent.iterdir()) == ["linear.tsv"]  # no temporary file left


def test_shards_of_other_window_widths_are_refused_naming_both_folders(trained_cells, tiny_demo, tmp_path):
    split = SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",))
    wider = windows_and_shards(tiny_demo, "demo_b", split, tmp_path / "wider", widths=(80, 48)) / "shards"
    models, _ = models_and_shards(trained_cells)
    message = (
        f"{models['demo_a']} was trained on windows {{'enhancer': 64, 'promoter': 48}}, but {wider} holds "
        "{'enhancer': 80, 'promoter': 48}: transfer needs the same window widths for every cell line."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        write_transfer({"demo_a": models["demo_a"]}, {"demo_b": wider}, tmp_path / "out.tsv")
    assert not (tmp_path / "out.tsv").exists()
