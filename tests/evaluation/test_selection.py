"""The run's choice of M7, made from validation predictions alone (evaluation.selection)."""

import json
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from epiformer.evaluation.selection import (
    ValidationResult,
    chosen_names,
    read_selection,
    selection_markdown,
    write_selection,
)
from epiformer.io.predictions import PredictionsFileError, read_predictions


def model_folder(root, name, **model):
    """A model folder with the model.json fields selection reads."""
    folder = root / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    windows = {"enhancer_width": 64, "promoter_width": 48}
    (folder / "model.json").write_text(json.dumps({"model": {"attention": "linear", **model}, "windows": windows}))
    return folder


def predictions_with_auroc(path, positives: int, negatives: int, wins: int):
    """Validation predictions whose AUROC is wins / (positives * negatives): negatives score 0..n-1 (scaled);
    the positives' scores are placed so that exactly `wins` positive-negative pairs rank right."""
    scores, remaining = [], wins
    for _ in range(positives):
        above = min(remaining, negatives)  # this positive beats the `above` lowest negatives
        scores.append(above - 0.5)
        remaining -= above
    negative_scores = np.arange(negatives, dtype=float)
    frame = pd.DataFrame(
        {
            "pair_id": np.arange(positives + negatives),
            "label": [1] * positives + [0] * negatives,
            "score": (np.array(scores + list(negative_scores)) + 1) / (negatives + 2),
        }
    )
    frame.to_csv(path, sep="\t", index=False)
    return path


def results(tmp_path, wins: dict, models: dict):
    """ValidationResults of each (cell, model) with the given number of wins out of 4 x 5 = 20."""
    entries = []
    for (cell, model), count in wins.items():
        path = predictions_with_auroc(tmp_path / f"{cell}_{model}.tsv", 4, 5, count)
        entries.append(ValidationResult(cell, model, path, model_folder(tmp_path, model, **models[model])))
    return entries


MODELS = {
    "linear": {},
    "linear_distance": {"distance": True},
    "softmax": {"attention": "softmax"},
    "linear_span_length_control": {"input": "span", "between": "shuffled"},
}


def test_the_candidate_with_the_highest_mean_validation_auroc_is_chosen(tmp_path):
    wins = {
        ("a", "linear"): 14, ("b", "linear"): 12,  # mean 0.65
        ("a", "linear_distance"): 18, ("b", "linear_distance"): 10,  # mean 0.70: chosen
        ("a", "softmax"): 20, ("b", "softmax"): 20,  # higher, but not M7
        ("a", "linear_span_length_control"): 19, ("b", "linear_span_length_control"): 19,  # a control
    }  # fmt: skip
    table = write_selection(results(tmp_path, wins, MODELS), tmp_path / "selection.tsv")
    pd.testing.assert_frame_equal(read_selection(tmp_path / "selection.tsv"), table, check_dtype=False, atol=1e-6)
    assert chosen_names(table) == ["linear_distance"]
    assert table.loc[table["chosen"], "cell_line"].tolist() == ["a", "b"]
    by = table.set_index(["cell_line", "model"])
    assert by.loc[("a", "linear_distance"), "val_auroc"] == pytest.approx(18 / 20)
    assert by.loc[("b", "linear"), "mean_val_auroc"] == pytest.approx(0.65)
    assert by["candidate"].to_dict() == {key: key[1] in ("linear", "linear_distance") for key in by.index}
    assert (by["val_pairs"] == 9).all() and (by["val_positives"] == 4).all()


def test_a_tie_goes_to_the_model_earlier_in_the_config_and_no_candidate_chooses_nothing(tmp_path):
    wins = {("a", "linear_distance"): 15, ("a", "linear"): 15, ("a", "softmax"): 20}
    assert chosen_names(write_selection(results(tmp_path, wins, MODELS), tmp_path / "s.tsv")) == ["linear_distance"]
    only_softmax = {("a", "softmax"): 20}
    table = write_selection(results(tmp_path, only_softmax, MODELS), tmp_path / "t.tsv")
    assert chosen_names(table) == [] and not table["chosen"].any()
    assert selection_markdown(table, pd.DataFrame({"model": []})) == []


def test_the_summary_section_names_the_choice_and_each_candidates_validation_auroc(tmp_path):
    wins = {("a", "linear"): 10, ("a", "linear_distance"): 16, ("b", "linear"): 12, ("b", "linear_distance"): 14}
    table = write_selection(results(tmp_path, wins, MODELS), tmp_path / "selection.tsv")
    summary = pd.DataFrame(
        {"cell_line": ["a", "b"], "model": ["linear_distance"] * 2, "auroc": [0.81, 0.62],
         "peer_baseline": ["distance_kmer"] * 2, "peer_verdict": ["above", "tie: interval"]}
    )  # fmt: skip
    text = "\n".join(selection_markdown(table, summary))
    assert "puts **linear_distance** forward" in text
    assert "| **linear_distance** | 0.750 | 0.800 | 0.700 |" in text and "| linear | 0.550 | 0.500 | 0.600 |" in text
    assert "| b | 0.620 | distance_kmer | tie: interval |" in text


def test_a_validation_file_that_is_not_a_prediction_table_is_named_with_its_fault(tmp_path):
    good = predictions_with_auroc(tmp_path / "p.tsv", 2, 3, 4)
    assert len(read_predictions(good)) == 5
    frame = pd.read_csv(good, sep="\t")
    cases = {
        "a pair_id appears twice": frame.assign(pair_id=0),
        "a label is not 0 or 1": frame.assign(label=2),
        "a score is missing or not a finite number": frame.assign(score=[0.1, None, 0.3, 0.4, 0.5]),
        "lacks the column(s) score": frame.drop(columns="score"),
    }
    for fault, broken in cases.items():
        broken.to_csv(tmp_path / "bad.tsv", sep="\t", index=False)
        with pytest.raises(PredictionsFileError, match=re.escape(fault)) as raised:
            read_predictions(tmp_path / "bad.tsv")
        assert str(tmp_path / "bad.tsv") in str(raised.value)


def test_candidates_are_averaged_over_the_cell_lines_where_every_one_has_a_validation_auroc(tmp_path):
    entries = results(tmp_path, {("b", "linear"): 10, ("b", "linear_distance"): 16}, MODELS)
    for model in ("linear", "linear_distance"):  # cell line a: a validation split of one class, no AUROC
        path = tmp_path / f"a_{model}.tsv"
        pd.DataFrame({"pair_id": [1, 2], "label": [1, 1], "score": [0.2, 0.9]}).to_csv(path, sep="\t", index=False)
        entries.append(ValidationResult("a", model, path, tmp_path / "models" / model))
    table = write_selection(entries, tmp_path / "selection.tsv")
    assert table.loc[table["cell_line"] == "a", "val_auroc"].isna().all()
    assert table.set_index(["cell_line", "model"]).loc[("a", "linear_distance"), "mean_val_auroc"] == pytest.approx(0.8)
    assert chosen_names(table) == ["linear_distance"]
    # A cell line where one candidate has no AUROC is left out of every candidate's mean.
    one = results(tmp_path, {("c", "linear"): 20, ("d", "linear"): 8, ("d", "linear_distance"): 12}, MODELS)
    path = tmp_path / "c_distance.tsv"
    pd.DataFrame({"pair_id": [1, 2], "label": [0, 0], "score": [0.2, 0.9]}).to_csv(path, sep="\t", index=False)
    one.append(ValidationResult("c", "linear_distance", path, tmp_path / "models" / "linear_distance"))
    assert chosen_names(write_selection(one, tmp_path / "s2.tsv")) == ["linear_distance"]  # 0.60 > 0.40 on d alone


def test_each_family_of_models_that_differ_only_in_recipe_gets_its_best_by_validation(tmp_path):
    models = {
        **MODELS,
        "linear_lr": {"dropout": 0.1},  # a recipe of M7's family
        "softmax_lr": {"attention": "softmax", "dropout": 0.1},  # a recipe of the softmax twin's
        "deltanet": {"attention": "deltanet"},  # a family of one
        "linear_pooled": {},  # kept in pooled/, as the workflow keeps a pooled model: a family of its own
    }
    wins = {
        ("a", "linear"): 12, ("b", "linear"): 12,  # 0.60
        ("a", "linear_lr"): 16, ("b", "linear_lr"): 14,  # 0.75: M7's recipe
        ("a", "softmax"): 20, ("b", "softmax"): 10,  # 0.75: first on a tie
        ("a", "softmax_lr"): 10, ("b", "softmax_lr"): 20,  # 0.75
        ("a", "deltanet"): 4, ("b", "deltanet"): 4,  # 0.20, and still its family's only recipe
        ("a", "linear_distance"): 18, ("b", "linear_distance"): 18,  # 0.90: the run's M7, another family
        ("a", "linear_pooled"): 19, ("b", "linear_pooled"): 19,
    }  # fmt: skip
    entries = results(tmp_path, wins, models)
    pooled = tmp_path / "results" / "pooled" / "linear_pooled"
    pooled.mkdir(parents=True)
    (pooled / "model.json").write_text((tmp_path / "models" / "linear_pooled" / "model.json").read_text())
    entries = [replace(entry, model_dir=pooled) if entry.model == "linear_pooled" else entry for entry in entries]
    table = write_selection(entries, tmp_path / "selection.tsv")
    pd.testing.assert_frame_equal(read_selection(tmp_path / "selection.tsv"), table, check_dtype=False, atol=1e-6)
    by_model = table.groupby("model", sort=False).first()
    assert by_model["family"].to_dict() == {
        "linear": "linear",
        "linear_lr": "linear",
        "softmax": "softmax",
        "softmax_lr": "softmax",
        "deltanet": "deltanet",
        "linear_distance": "linear+distance",
        "linear_pooled": "linear+pooled",
    }
    assert sorted(by_model.index[by_model["chosen_in_family"]]) == [
        "deltanet", "linear_distance", "linear_lr", "linear_pooled", "softmax"
    ]  # fmt: skip
    assert by_model.loc["linear_lr", "family_mean_val_auroc"] == pytest.approx(0.75)
    assert chosen_names(table) == ["linear_pooled"]  # the run's M7: the best candidate across families


def test_a_family_is_averaged_over_the_cell_lines_where_each_of_its_models_has_a_validation_auroc(tmp_path):
    models = {"softmax": {"attention": "softmax"}, "softmax_lr": {"attention": "softmax", "dropout": 0.1}}
    entries = results(tmp_path, {("a", "softmax"): 4, ("b", "softmax"): 16, ("b", "softmax_lr"): 12}, models)
    path = tmp_path / "a_softmax_lr.tsv"  # cell line a: one class for this model's validation pairs, no AUROC
    pd.DataFrame({"pair_id": [1, 2], "label": [1, 1], "score": [0.2, 0.9]}).to_csv(path, sep="\t", index=False)
    entries.append(ValidationResult("a", "softmax_lr", path, tmp_path / "models" / "softmax_lr"))
    table = write_selection(entries, tmp_path / "selection.tsv").groupby("model").first()
    # On b alone, softmax (0.80) beats softmax_lr (0.60); over a and b softmax's mean (0.50) would have lost.
    assert table.loc["softmax", "family_mean_val_auroc"] == pytest.approx(0.8)
    assert table["chosen_in_family"].to_dict() == {"softmax": True, "softmax_lr": False}
