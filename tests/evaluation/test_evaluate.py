"""A trained model's test predictions and their metrics, as the evaluate rule writes them."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score

from epiformer.data.shards import load_split
from epiformer.data.splits import SplitSpec
from epiformer.evaluation.evaluate import evaluate_model
from epiformer.inference.trained_model import ModelError, load_trained_model, predict_split
from epiformer.io.files import sha256_file
from tests.helpers import windows_and_shards


def test_evaluation_writes_every_test_pair_and_metrics_with_the_validation_threshold(trained_cells, tmp_path):
    folder = trained_cells["demo_b"]
    written = evaluate_model(folder / "linear", folder / "shards", tmp_path / "p.tsv", tmp_path / "m.json", 50, seed=3)
    assert json.loads((tmp_path / "m.json").read_text()) == written
    predictions = pd.read_csv(tmp_path / "p.tsv", sep="\t")
    test = pd.read_csv(folder / "windows.tsv", sep="\t").query("split == 'test'").sort_values("pair_id")
    assert list(predictions.columns) == ["pair_id", "label", "score"]
    assert predictions["pair_id"].tolist() == test["pair_id"].tolist()  # every test pair, by pair_id
    assert predictions["label"].tolist() == test["label"].tolist()
    model, _ = load_trained_model(folder / "linear")
    val_scores, val_labels, _ = predict_split(model, load_split(folder / "shards", "val"), 64, torch.device("cpu"))
    test_scores, _, test_ids = predict_split(model, load_split(folder / "shards", "test"), 64, torch.device("cpu"))
    test_scores = test_scores[np.argsort(test_ids)]  # by pair_id, as predictions.tsv
    # Each score as computed: the file reads back to the same float32, so nothing is tied by rounding.
    np.testing.assert_array_equal(predictions["score"].to_numpy(np.float32), test_scores)
    # The threshold that maximises F1 on validation, found here from scikit-learn's curve.
    precision, recall, thresholds = precision_recall_curve(val_labels, val_scores)
    f1 = 2 * precision[:-1] * recall[:-1] / np.maximum(precision[:-1] + recall[:-1], 1e-12)
    assert written["threshold"] == pytest.approx(thresholds[np.argmax(f1)])
    for name, metric in (("auroc", roc_auc_score), ("auprc", average_precision_score)):
        assert written[name] == pytest.approx(metric(test["label"], test_scores), abs=1e-12)
        assert written[name] == pytest.approx(metric(predictions["label"], predictions["score"]), abs=1e-9)
    assert (written["n_test"], written["positives"]) == (len(test), test["label"].sum())
    assert written["split"] == {"mode": "chromosome", "leak_prone": False}
    assert (written["windows"]["enhancer_width"], written["windows"]["promoter_width"]) == (64, 48)


def validation_threshold(model_dir, shards) -> float:
    """The best-F1 threshold of the model's validation scores, scored anew here."""
    from epiformer.evaluation.metrics import best_f1_threshold

    scores, labels, _ = predict_split(load_trained_model(model_dir)[0], load_split(shards, "val"), 64)
    return best_f1_threshold(labels, scores)


def test_evaluation_takes_training_validation_scores_only_with_their_weights_and_shards(
    trained_cells, tiny_demo, tmp_path
):
    folder = tmp_path / "linear"
    shutil.copytree(trained_cells["demo_b"] / "linear", folder)
    own, other = trained_cells["demo_b"] / "shards", trained_cells["demo_a"] / "shards"
    kept_path, description_path = folder / "val_predictions.tsv", folder / "model.json"
    fresh = validation_threshold(folder, own)
    assert evaluate_model(folder, own, tmp_path / "p0.tsv", tmp_path / "m0.json", 10)["threshold"] == pytest.approx(
        fresh, rel=1e-6
    )
    # Halved and recorded in model.json: evaluation reads the file, whose threshold is halved too.
    kept = pd.read_csv(kept_path, sep="\t")
    kept.assign(score=kept["score"] / 2).to_csv(kept_path, sep="\t", index=False)
    description = json.loads(description_path.read_text())
    description_path.write_text(json.dumps({**description, "val_predictions_sha256": sha256_file(kept_path)}))
    used = evaluate_model(folder, own, tmp_path / "p1.tsv", tmp_path / "m1.json", 10)
    assert used["threshold"] == pytest.approx(fresh / 2, rel=1e-6)
    assert (tmp_path / "p1.tsv").read_text() == (tmp_path / "p0.tsv").read_text()  # the test split scored as before
    # Other shards (transfer to another cell line): scored anew there.
    elsewhere = evaluate_model(folder, other, tmp_path / "p2.tsv", tmp_path / "m2.json", 10)
    assert elsewhere["threshold"] == pytest.approx(validation_threshold(folder, other), rel=1e-6)
    # The same pairs encoded again (another flank: the same ids, labels and centred windows): other shards.
    split = SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",))
    again = windows_and_shards(tiny_demo, "demo_b", split, tmp_path / "again", flank=6) / "shards"
    assert sorted(load_split(again, "val").pair_id) == kept["pair_id"].tolist()
    reencoded = evaluate_model(folder, again, tmp_path / "p4.tsv", tmp_path / "m4.json", 10)
    assert reencoded["threshold"] == pytest.approx(fresh, rel=1e-6)
    # Scores made on another kind of device (a GPU's, in bfloat16) do not stand for the CPU's.
    on_gpu = {**description, "val_predictions_sha256": sha256_file(kept_path), "device": "cuda:0"}
    description_path.write_text(json.dumps(on_gpu))
    assert evaluate_model(folder, own, tmp_path / "p5.tsv", tmp_path / "m5.json", 10)["threshold"] == pytest.approx(
        fresh, rel=1e-6
    )
    # A file model.json does not vouch for (left from another training): scored anew.
    description_path.write_text(json.dumps(description))
    stale = evaluate_model(folder, own, tmp_path / "p3.tsv", tmp_path / "m3.json", 10)
    assert stale["threshold"] == pytest.approx(fresh, rel=1e-6)


def ensemble_of(trained_cells, folder):
    """An ensemble folder whose replicates are demo_a's and demo_b's linear models (one architecture)."""
    for index, cell in enumerate(("demo_a", "demo_b"), start=1):
        shutil.copytree(trained_cells[cell] / "linear", folder / "replicates" / str(index))
    description = json.loads((trained_cells["demo_a"] / "linear" / "model.json").read_text())
    (folder / "model.json").write_text(json.dumps({**description, "replicates": ["replicates/1", "replicates/2"]}))
    return folder


def test_an_ensemble_is_evaluated_as_the_mean_probability_of_its_replicates(trained_cells, tmp_path):
    folder = ensemble_of(trained_cells, tmp_path / "ensemble")
    shards = trained_cells["demo_b"] / "shards"
    out = tmp_path / "out"
    written = evaluate_model(folder, shards, out / "predictions.tsv", out / "metrics.json", 50, seed=3)
    ensemble = pd.read_csv(out / "predictions.tsv", sep="\t")
    members = [pd.read_csv(out / "replicates" / name / "predictions.tsv", sep="\t") for name in ("1", "2")]
    for member, cell in zip(members, ("demo_a", "demo_b")):
        scores, _, ids = predict_split(
            load_trained_model(trained_cells[cell] / "linear")[0], load_split(shards, "test")
        )
        np.testing.assert_array_equal(member["score"].to_numpy(np.float32), scores[np.argsort(ids)])
    np.testing.assert_allclose(ensemble["score"], (members[0]["score"] + members[1]["score"]) / 2, atol=1e-12)
    # The ensemble as one model (predict, variants, explain, transfer load it so) scores the same to 1e-6.
    model, _ = load_trained_model(folder)
    scores, _, ids = predict_split(model, load_split(shards, "test"))
    np.testing.assert_allclose(scores[np.argsort(ids)], ensemble["score"], atol=1e-6, rtol=0)
    assert [entry["replicate"] for entry in written["replicates"]] == ["replicates/1", "replicates/2"]
    for entry, member in zip(written["replicates"], members):
        assert entry["auroc"] == pytest.approx(roc_auc_score(member["label"], member["score"]), abs=1e-9)
    assert written["auroc"] == pytest.approx(roc_auc_score(ensemble["label"], ensemble["score"]), abs=1e-9)


def test_an_ensemble_with_a_replicate_of_another_model_is_refused(trained_cells, tmp_path):
    folder = ensemble_of(trained_cells, tmp_path / "ensemble")
    other = json.loads((folder / "replicates" / "2" / "model.json").read_text())
    other["model"]["n_layers"] += 1
    (folder / "replicates" / "2" / "model.json").write_text(json.dumps(other))
    with pytest.raises(ModelError, match=r"replicates/2/model.json describes another model than the ensemble"):
        load_trained_model(folder)
    shutil.rmtree(folder / "replicates" / "2")
    with pytest.raises(ModelError, match=r"Model folder not found: .*replicates/2"):
        load_trained_model(folder)


def test_replicates_scored_on_different_pairs_are_not_averaged():
    from epiformer.evaluation.evaluate import mean_probability

    one = pd.DataFrame({"pair_id": [0, 1], "label": [0, 1], "score": [0.2, 0.8]})
    two = pd.DataFrame({"pair_id": [0, 2], "label": [0, 1], "score": [0.4, 0.6]})
    assert mean_probability([one, one.assign(score=[0.4, 0.6])])["score"].tolist() == pytest.approx([0.3, 0.7])
    with pytest.raises(ValueError, match="scored different pairs"):
        mean_probability([one, two])


def test_validation_is_scored_alone_and_evaluation_takes_its_threshold_from_that_file(trained_cells, tmp_path):
    from epiformer.evaluation.evaluate import score_validation
    from epiformer.io.predictions import read_predictions

    folder = ensemble_of(trained_cells, tmp_path / "ensemble")
    shards = trained_cells["demo_b"] / "shards"
    validation = score_validation(folder, shards, tmp_path / "validation_predictions.tsv")
    written = read_predictions(tmp_path / "validation_predictions.tsv")
    val = pd.read_csv(trained_cells["demo_b"] / "windows.tsv", sep="\t").query("split == 'val'")
    assert sorted(written["pair_id"]) == sorted(val["pair_id"]) and len(validation) == len(val)
    members = [
        predict_split(load_trained_model(trained_cells[cell] / "linear")[0], load_split(shards, "val"))
        for cell in ("demo_a", "demo_b")
    ]
    means = pd.DataFrame({"pair_id": members[0][2], "mean": (members[0][0] + members[1][0]) / 2})
    merged = written.merge(means, on="pair_id")
    np.testing.assert_allclose(merged["score"], merged["mean"], atol=1e-6, rtol=0)
    # The threshold read from the file is the one scoring validation anew gives; the test metrics are the same.
    both = evaluate_model(folder, shards, tmp_path / "a.tsv", tmp_path / "a.json", 20, seed=1)
    taken = evaluate_model(
        folder, shards, tmp_path / "b.tsv", tmp_path / "b.json", 20, seed=1,
        validation_predictions=tmp_path / "validation_predictions.tsv",
    )  # fmt: skip
    assert taken["threshold"] == pytest.approx(both["threshold"], abs=1e-6)
    assert (taken["auroc"], taken["auprc"]) == (both["auroc"], both["auprc"])
    # A threshold comes from that file, not from the model: another file's threshold is taken.
    flipped = written.assign(score=1 - written["score"])
    flipped.to_csv(tmp_path / "flipped.tsv", sep="\t", index=False)
    other = evaluate_model(
        folder, shards, tmp_path / "c.tsv", tmp_path / "c.json", 20, validation_predictions=tmp_path / "flipped.tsv"
    )
    assert other["threshold"] != pytest.approx(both["threshold"], abs=1e-6)
