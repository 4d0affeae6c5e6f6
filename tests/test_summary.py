"""epiformer.summary: one row per (cell line, model or baseline), and the paired comparison of each
Transformer with each baseline on the same test pairs (summary.tsv, summary.md, paired_comparison.tsv)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.metrics import compute_metrics
from epiformer.summary import ModelResult, paired_predictions, write_summary
from tests.helpers import shared_difficulty

METRICS = {"auroc": roc_auc_score, "auprc": average_precision_score}
EXISTING_COLUMNS = [
    "cell_line",
    "model",
    "kind",
    "attention",
    "auroc",
    "auroc_lo",
    "auroc_hi",
    "auprc",
    "auprc_lo",
    "auprc_hi",
    "f1",
    "mcc",
    "balanced_accuracy",
    "n_test",
    "positives",
    "split_mode",
    "parameters",
    "train_seconds",
    "tokens_per_s",
    "device",
    "oracle_auroc",
]


def write_predictions(path, pair_ids, labels, scores):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"pair_id": pair_ids, "label": labels, "score": scores}).to_csv(path, sep="\t", index=False)
    return path


def make_result(folder, cell, name, pair_ids, labels, scores, attention=None) -> ModelResult:
    """A finished (cell line, model or baseline): predictions.tsv, metrics.json and, for a model, model.json."""
    predictions = write_predictions(folder / cell / name / "predictions.tsv", pair_ids, labels, scores)
    frame = pd.read_csv(predictions, sep="\t")
    metrics = {**compute_metrics(frame, frame, resamples=50, seed=0), "split_mode": "chromosome"}
    (folder / cell / name / "metrics.json").write_text(json.dumps(metrics))
    description = None
    if attention:
        description = folder / cell / name / "model.json"
        description.write_text(
            json.dumps(
                {
                    "model": {"attention": attention},
                    "parameters": 10,
                    "train_seconds": 1.0,
                    "tokens_per_s": 5.0,
                    "device": "cpu",
                }
            )
        )
    return ModelResult(cell, name, folder / cell / name / "metrics.json", description, predictions)


def test_summary_files_carry_the_paired_comparison(tmp_path):
    results, expected = [], {}
    for cell, seed in (("cell_x", 0), ("cell_y", 1)):
        labels, model, baseline = shared_difficulty(seed=seed)
        pair_ids = np.arange(len(labels)) * 3 + 7
        rng = np.random.default_rng(seed)
        shuffled = rng.permutation(len(labels))  # the baseline's rows in another order: matched by pair_id
        results += [
            make_result(tmp_path, cell, "linear", pair_ids, labels, model, attention="linear"),
            make_result(tmp_path, cell, "kmer", pair_ids[shuffled], labels[shuffled], baseline[shuffled]),
            make_result(tmp_path, cell, "flat", pair_ids, labels, np.zeros(len(labels))),
        ]
        for name, metric in METRICS.items():
            expected[(cell, "kmer", name)] = metric(labels, model) - metric(labels, baseline)
            expected[(cell, "flat", name)] = metric(labels, model) - metric(labels, np.zeros(len(labels)))
    paths = [tmp_path / name for name in ("summary.tsv", "summary.md", "paired.tsv")]
    write_summary(results, *paths, resamples=200, seed=0)
    summary, paired = pd.read_csv(paths[0], sep="\t"), pd.read_csv(paths[2], sep="\t")
    columns = [f"{m}_diff_{b}{s}" for b in ("kmer", "flat") for m in ("auroc", "auprc") for s in ("", "_lo", "_hi")]
    assert list(summary.columns) == EXISTING_COLUMNS + columns  # every existing column kept, in place
    assert list(summary["kind"]) == ["transformer", "baseline", "baseline"] * 2
    assert summary.loc[summary["kind"] == "baseline", columns].isna().all().all()
    models = summary[summary["kind"] == "transformer"].set_index("cell_line")
    for (cell, baseline, name), difference in expected.items():
        assert models.loc[cell, f"{name}_diff_{baseline}"] == pytest.approx(difference, abs=1e-4)
        row = paired.set_index(["cell_line", "baseline", "metric"]).loc[(cell, baseline, name)]
        assert row["difference"] == pytest.approx(difference, abs=1e-4) and row["model"] == "linear"
        assert (models.loc[cell, f"{name}_diff_{baseline}_lo"], models.loc[cell, f"{name}_diff_{baseline}_hi"]) == (
            row["lo"],
            row["hi"],
        )
        assert row["excludes_zero"] == (row["lo"] > 0 or row["hi"] < 0) and row["seed"] == 0
    assert paired["excludes_zero"].all()  # the model beats both baselines clearly
    markdown = paths[1].read_text()
    lines = [line for line in markdown.splitlines() if re.match(r"\| cell_[xy] \| linear vs ", line)]
    assert len(lines) == 4 and all(line.count("yes: model better") == 2 for line in lines)
    kmer = paired.set_index(["cell_line", "baseline", "metric"]).loc[("cell_x", "kmer", "auroc")]
    assert f"{kmer['difference']:+.3f} [{kmer['lo']:+.3f}, {kmer['hi']:+.3f}]" in markdown


def test_a_model_equal_to_its_baseline_is_not_called_different(tmp_path):
    labels, model, _ = shared_difficulty()
    results = [
        make_result(tmp_path, "c", "linear", np.arange(len(labels)), labels, model, attention="linear"),
        make_result(tmp_path, "c", "copy", np.arange(len(labels)), labels, model),
    ]
    write_summary(results, tmp_path / "s.tsv", tmp_path / "s.md", tmp_path / "p.tsv", resamples=100, seed=0)
    paired = pd.read_csv(tmp_path / "p.tsv", sep="\t")
    assert (paired[["difference", "lo", "hi"]] == 0).all().all() and not paired["excludes_zero"].any()
    assert "| c | linear vs copy | +0.000 [+0.000, +0.000] | no |" in (tmp_path / "s.md").read_text()


@pytest.mark.parametrize(
    "baseline_ids, baseline_labels, message",
    [
        ([0, 1, 2, 9], [0, 1, 0, 1], r"1 pair_id\(s\) only in the first \(e.g. \[3\]\), 1 only in the second"),
        ([0, 1, 2], [0, 1, 0], r"1 pair_id\(s\) only in the first"),
        ([0, 1, 2, 3, 4], [0, 1, 0, 1, 1], r"0 pair_id\(s\) only in the first .* 1 only in the second"),
        ([0, 1, 2, 3], [0, 1, 1, 1], r"different labels to 1 test pair\(s\) \(e.g. pair_id 2\)"),
        ([0, 1, 2, 2, 3], [0, 1, 0, 0, 1], r"pair_id 2 appears twice"),
    ],
)
def test_mismatched_test_pairs_are_an_error_naming_both_files(tmp_path, baseline_ids, baseline_labels, message):
    model = write_predictions(tmp_path / "c" / "linear" / "predictions.tsv", [0, 1, 2, 3], [0, 1, 0, 1], [0.1] * 4)
    baseline = write_predictions(
        tmp_path / "c" / "kmer" / "predictions.tsv", baseline_ids, baseline_labels, [0.5] * len(baseline_ids)
    )
    with pytest.raises(ValueError, match=message) as error:
        paired_predictions(model, baseline)
    assert str(model) in str(error.value) and str(baseline) in str(error.value)


def test_mismatched_test_pairs_stop_the_summary(tmp_path):
    labels, model, baseline = shared_difficulty(n=50)
    results = [
        make_result(tmp_path, "c", "linear", np.arange(50), labels, model, attention="linear"),
        make_result(tmp_path, "c", "kmer", np.arange(1, 51), labels, baseline),
    ]
    with pytest.raises(ValueError, match="do not hold the same test pairs") as error:
        write_summary(results, tmp_path / "s.tsv", tmp_path / "s.md", tmp_path / "p.tsv")
    assert str(results[0].predictions) in str(error.value) and str(results[1].predictions) in str(error.value)
    assert not (tmp_path / "s.tsv").exists()
