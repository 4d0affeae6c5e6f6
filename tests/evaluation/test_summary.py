"""epiformer.evaluation.summary: one row per (cell line, model or baseline), and the paired comparison of each
Transformer with each baseline on the same test pairs (summary.tsv, summary.md, paired_comparison.tsv)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.evaluation.distance import MATCHED_COLUMNS
from epiformer.evaluation.metrics import compute_metrics
from epiformer.evaluation.summary import (
    PAIRED_COLUMNS,
    REPLICATE_COLUMNS,
    ModelResult,
    oracle_auroc,
    paired_comparison,
    paired_predictions,
    read_summary,
    summary_row,
    with_paired_columns,
    write_summary,
)
from epiformer.evaluation.summary_page import peer_markdown, replicates_markdown, to_markdown
from epiformer.evaluation.verdicts import (
    PEER_COLUMNS,
    best_baseline,
    replicate_values,
    spread_verdict,
    with_peer_columns,
)
from epiformer.model.configs import ModelConfig
from tests.helpers import shared_difficulty

METRICS = {"auroc": roc_auc_score, "auprc": average_precision_score}
EXISTING_COLUMNS = [
    "cell_line",
    "model",
    "kind",
    "attention",
    "input",
    "between",
    "reads",
    "pooled",
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
    "bootstrap_unit",
    "bootstrap_groups",
    "split_mode",
    "parameters",
    "train_seconds",
    "tokens_per_s",
    "device",
    "peak_memory_mb",
    "epochs_trained",
    "oracle_auroc",
    "element_ceiling_auroc",
    "pairs_in",
    "dropped_pairs",
    "dropped_for_span",
    *REPLICATE_COLUMNS,
]


def write_predictions(path, pair_ids, labels, scores):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"pair_id": pair_ids, "label": labels, "score": scores}).to_csv(path, sep="\t", index=False)
    return path


def make_result(folder, cell, name, pair_ids, labels, scores, attention=None, **settings) -> ModelResult:
    """A finished (cell line, model or baseline): predictions.tsv, metrics.json and, for a model, model.json."""
    predictions = write_predictions(folder / cell / name / "predictions.tsv", pair_ids, labels, scores)
    frame = pd.read_csv(predictions, sep="\t")
    metrics = {**compute_metrics(frame, frame, resamples=50, seed=0), "split": CHROMOSOME_SPLIT}
    (folder / cell / name / "metrics.json").write_text(json.dumps(metrics))
    description = None
    if attention:
        description = folder / cell / name / "model.json"
        description.write_text(
            json.dumps(
                {
                    "model": ModelConfig(attention=attention, **settings).to_dict(),
                    "windows": {"enhancer_width": 3000, "promoter_width": 2000},
                    "parameters": 10,
                    "train_seconds": 1.0,
                    "tokens_per_s": 5.0,
                    "device": "cpu",
                    "peak_memory_mb": 100.0,
                    "epochs_trained": 2.0,
                }
            )
        )
    return ModelResult(cell, name, folder / cell / name / "metrics.json", description, predictions)


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


CHROMOSOME_SPLIT = {"mode": "chromosome", "leak_prone": False}  # as metrics.json records the split
METRICS_JSON = {
    "auroc": 0.8125,
    "auroc_ci95": [0.75, 0.875],
    "auprc": 0.625,
    "auprc_ci95": [0.5, 0.75],
    "f1": 0.5,
    "mcc": 0.25,
    "balanced_accuracy": 0.6875,
    "n_test": 120,
    "positives": 30,
    "bootstrap_unit": "promoter",
    "bootstrap_groups": 41,
    "split": CHROMOSOME_SPLIT,
}
DESCRIPTION = {
    "model": ModelConfig(attention="softmax").to_dict(),
    "windows": {"enhancer_width": 3000, "promoter_width": 2000},
    "parameters": 1234,
    "train_seconds": 12.5,
    "tokens_per_s": 800.0,
    "device": "cpu",
    "peak_memory_mb": 321.5,
    "epochs_trained": 10,
}


def test_a_model_row_takes_its_values_from_metrics_json_and_model_json(tmp_path):
    result = ModelResult(
        "cell_x",
        "softmax",
        write_json(tmp_path / "metrics.json", METRICS_JSON),
        write_json(tmp_path / "model.json", DESCRIPTION),
        tmp_path / "predictions.tsv",
    )
    row = summary_row(result)
    assert list(row) == EXISTING_COLUMNS
    assert row == {
        "cell_line": "cell_x",
        "model": "softmax",
        "kind": "transformer",
        "attention": "softmax",
        "input": "elements",
        "between": None,
        "reads": "sequence",
        "pooled": False,
        "auroc": 0.8125,
        "auroc_lo": 0.75,
        "auroc_hi": 0.875,
        "auprc": 0.625,
        "auprc_lo": 0.5,
        "auprc_hi": 0.75,
        "f1": 0.5,
        "mcc": 0.25,
        "balanced_accuracy": 0.6875,
        "n_test": 120,
        "positives": 30,
        "bootstrap_unit": "promoter",
        "bootstrap_groups": 41,
        "split_mode": "chromosome",
        "parameters": 1234,
        "train_seconds": 12.5,
        "tokens_per_s": 800.0,
        "device": "cpu",
        "peak_memory_mb": 321.5,
        "epochs_trained": 10,
        "oracle_auroc": None,
        "element_ceiling_auroc": None,
        "pairs_in": None,
        "dropped_pairs": None,
        "dropped_for_span": None,
        # One model counts as one replicate: its own AUROC and AUPRC, no spread.
        "replicates": 1,
        "replicate_auroc_mean": 0.8125,
        "replicate_auroc_sd": None,
        "replicate_auprc_mean": 0.625,
        "replicate_auprc_sd": None,
        "replicate_aurocs": "0.8125",
        "replicate_auprcs": "0.6250",
    }


def test_pairs_dropped_for_their_span_are_counted_in_the_row_and_said_in_summary_md(tmp_path):
    stats = {
        "pairs_in": 1000,
        "pairs_kept": 700,
        "dropped": {"duplicate_row": 20, "span_longer_than_max_span": 270, "span_across_chromosomes": 10},
    }
    rows = []
    for model, description in (("linear_span", DESCRIPTION), ("distance", None)):
        result = ModelResult(
            "cell_x",
            model,
            write_json(tmp_path / model / "metrics.json", METRICS_JSON),
            write_json(tmp_path / "model.json", description) if description else None,
            tmp_path / "predictions.tsv",
            windows_stats=write_json(tmp_path / "windows_stats.json", stats),
        )
        rows.append(summary_row(result))
    for row in rows:  # the model's and the baseline's alike: both are scored on the pairs kept
        assert (row["pairs_in"], row["dropped_pairs"], row["dropped_for_span"]) == (1000, 300, 280)
    markdown = to_markdown(pd.DataFrame(rows))
    assert "cell_x: 280 of 1,000 pairs dropped for their span" in markdown and "300 dropped in all" in markdown
    kept_all = {**stats, "pairs_kept": 980, "dropped": {"duplicate_row": 20}}
    write_json(tmp_path / "windows_stats.json", kept_all)
    row = summary_row(result)
    assert row["dropped_for_span"] == 0 and "dropped for their span" not in to_markdown(pd.DataFrame([row]))


def test_a_baseline_row_counts_its_coefficients_and_a_random_split_is_flagged(tmp_path):
    random = {"mode": "random", "leak_prone": True}
    metrics = {**METRICS_JSON, "split": random, "baseline": {"name": "kmer", "features": 272}}
    row = summary_row(
        ModelResult("c", "kmer", write_json(tmp_path / "m.json", metrics), None, tmp_path / "predictions.tsv")
    )
    assert (row["kind"], row["attention"], row["parameters"]) == ("baseline", None, 273)  # features + intercept
    assert row["train_seconds"] is row["tokens_per_s"] is row["device"] is None
    assert row["split_mode"] == "random (leak-prone)"


def test_oracle_auroc_is_scikit_learns_on_the_true_probabilities_of_the_evaluated_pairs(tmp_path):
    rng = np.random.default_rng(4)
    truth = pd.DataFrame({"pair_id": np.arange(300), "label": rng.integers(0, 2, 300)})
    truth["p_interact"] = np.clip(0.3 * truth["label"] + rng.random(300), 0, 1)
    truth.to_csv(tmp_path / "truth.tsv", sep="\t", index=False)
    evaluated = truth.sample(120, random_state=1)  # the test pairs only, in another order
    predictions = write_predictions(tmp_path / "p.tsv", evaluated["pair_id"], evaluated["label"], rng.random(120))
    expected = roc_auc_score(evaluated["label"], evaluated["p_interact"])
    assert oracle_auroc(predictions, tmp_path / "truth.tsv") == pytest.approx(expected, abs=1e-12)
    assert expected != pytest.approx(roc_auc_score(truth["label"], truth["p_interact"]))  # not every pair's
    result = ModelResult(
        "c", "kmer", write_json(tmp_path / "m.json", METRICS_JSON), None, predictions, tmp_path / "truth.tsv"
    )
    assert summary_row(result)["oracle_auroc"] == pytest.approx(expected, abs=1e-12)


def test_each_model_is_compared_with_each_baseline_of_its_own_cell_line(tmp_path):
    labels, model, baseline = shared_difficulty(n=120)
    ids = np.arange(120)
    results = [
        make_result(tmp_path, "x", "linear", ids, labels, model, attention="linear"),
        make_result(tmp_path, "x", "softmax", ids, labels, model[::-1].copy(), attention="softmax"),
        make_result(tmp_path, "x", "kmer", ids, labels, baseline),
        make_result(tmp_path, "y", "linear", ids, labels, model, attention="linear"),  # no baseline in y
    ]
    paired = paired_comparison(results, resamples=20, seed=0)
    assert list(paired.columns) == PAIRED_COLUMNS
    assert list(zip(paired["cell_line"], paired["model"], paired["baseline"], paired["metric"])) == [
        ("x", "linear", "kmer", "auroc"),
        ("x", "linear", "kmer", "auprc"),
        ("x", "softmax", "kmer", "auroc"),
        ("x", "softmax", "kmer", "auprc"),
    ]
    for row in paired.itertuples():
        scores = model if row.model == "linear" else model[::-1]
        metric = METRICS[row.metric]
        assert row.model_value == pytest.approx(metric(labels, scores), abs=1e-12)
        assert row.baseline_value == pytest.approx(metric(labels, baseline), abs=1e-12)
        assert row.difference == pytest.approx(row.model_value - row.baseline_value, abs=1e-12)
        assert (row.n_test, row.positives, row.resamples, row.seed) == (120, labels.sum(), 20, 0)


def test_paired_columns_fill_model_rows_and_leave_baselines_and_missing_comparisons_empty():
    table = pd.DataFrame(
        {"cell_line": ["x", "x", "x", "y"], "model": ["linear", "kmer", "distance", "linear"]}
        | {"kind": ["transformer", "baseline", "baseline", "transformer"]}
    )
    paired = pd.DataFrame(
        [("x", "linear", "kmer", metric, 0.1 * i, 0.1 * i - 0.05, 0.1 * i + 0.05) for i, metric in enumerate(METRICS)],
        columns=["cell_line", "model", "baseline", "metric", "difference", "lo", "hi"],
    )
    wide = with_paired_columns(table, paired)
    columns = [f"{m}_diff_{b}{s}" for b in ("kmer", "distance") for m in METRICS for s in ("", "_lo", "_hi")]
    assert list(wide.columns) == list(table.columns) + columns
    assert wide.loc[0, ["auroc_diff_kmer", "auroc_diff_kmer_lo", "auroc_diff_kmer_hi"]].tolist() == [0.0, -0.05, 0.05]
    assert wide.loc[0, "auprc_diff_kmer"] == pytest.approx(0.1)
    assert wide.loc[[1, 2], columns].isna().all().all()  # baseline rows
    assert wide.loc[[0, 3], [c for c in columns if "distance" in c]].isna().all().all()  # never compared
    assert wide.loc[3, columns].isna().all()  # y has no paired rows
    assert "auroc_diff_kmer" not in table.columns  # the input table is left as it was


def test_markdown_marks_baselines_leaves_missing_values_empty_and_says_which_side_is_better():
    summary = pd.DataFrame(
        [
            {**dict.fromkeys(EXISTING_COLUMNS), "cell_line": "x", "model": "linear", "kind": "transformer"}
            | {"auroc": 0.9, "auroc_lo": 0.85, "auroc_hi": 0.95, "auprc": 0.7, "auprc_lo": 0.6, "auprc_hi": 0.8}
            | {"f1": 0.61, "mcc": 0.42, "oracle_auroc": 0.97, "parameters": 999, "train_seconds": 41.6},
            {**dict.fromkeys(EXISTING_COLUMNS), "cell_line": "x", "model": "kmer", "kind": "baseline"}
            | {"auroc": 0.7, "auroc_lo": 0.6, "auroc_hi": 0.8, "auprc": 0.5, "auprc_lo": 0.4, "auprc_hi": 0.6}
            | {"parameters": 273},
        ]
    )
    paired = pd.DataFrame(
        [
            ("x", "linear", "kmer", "auroc", 0.2, 0.1, 0.3, 100, 7),
            ("x", "linear", "kmer", "auprc", -0.2, -0.3, -0.1, 100, 7),
        ],
        columns=["cell_line", "model", "baseline", "metric", "difference", "lo", "hi", "resamples", "seed"],
    )
    lines = to_markdown(summary, paired).splitlines()
    assert lines[2] == "| x | linear | 0.900 (0.850-0.950) | 0.700 (0.600-0.800) | 0.610 | 0.420 | 0.970 | 999 | 42 |"
    assert lines[3] == "| x | kmer (baseline) | 0.700 (0.600-0.800) | 0.500 (0.400-0.600) |  |  |  | 273 |  |"
    assert "100 paired bootstrap resamples (seed 7)" in "\n".join(lines)
    assert lines[-1] == (
        "| x | linear vs kmer | +0.200 [+0.100, +0.300] | yes: model better | -0.200 [-0.300, -0.100] | "
        "yes: baseline better |"
    )
    assert "Transformer minus baseline" not in to_markdown(summary)  # no paired section without comparisons


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
    summary, paired = read_summary(paths[0]), pd.read_csv(paths[2], sep="\t")
    pd.testing.assert_frame_equal(summary, pd.read_csv(paths[0], sep="\t"))  # read back as written
    for name, text in {"paired.tsv": paths[2].read_text(), "empty.tsv": "", "binary.tsv": "\x00\xff\xfe"}.items():
        (tmp_path / name).write_bytes(text.encode("latin-1"))
        with pytest.raises(ValueError, match=rf"{name}: (no kind column|not a readable summary)"):
            read_summary(tmp_path / name)  # paired_comparison.tsv has cell_line and model, no kind
    columns = [f"{m}_diff_{b}{s}" for b in ("kmer", "flat") for m in ("auroc", "auprc") for s in ("", "_lo", "_hi")]
    # every existing column kept, in place; the within-distance ones after (empty without windows.tsv)
    assert list(summary.columns) == EXISTING_COLUMNS + columns + MATCHED_COLUMNS + PEER_COLUMNS + [
        "chosen_on_validation"
    ]
    assert summary["chosen_on_validation"].isna().all()  # no selection.tsv given: no choice to mark
    # "flat" is no baseline the package knows: what it reads is unknown, so kmer is the peer
    assert summary.loc[summary["kind"] == "transformer", "peer_baseline"].tolist() == ["kmer", "kmer"]
    assert summary.loc[summary["kind"] == "transformer", "peer_verdict"].tolist() == ["above", "above"]
    assert summary[MATCHED_COLUMNS].isna().all().all()
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


def peer_table(rows):
    """Summary rows (cell line c) from (model, kind, reads, pooled, auroc, replicate AUROCs) and, for models, the
    AUROC difference interval against every baseline: (lo, hi)."""
    records = []
    for name, kind, reads, pooled, auroc, replicates, interval in rows:
        record = {"cell_line": "c", "model": name, "kind": kind, "reads": reads, "pooled": pooled, "auroc": auroc}
        record["replicate_aurocs"] = replicates
        for baseline in ("distance", "kmer", "distance_kmer", "kmer_pooled"):
            low, high = interval or (None, None)
            record[f"auroc_diff_{baseline}_lo"], record[f"auroc_diff_{baseline}_hi"] = low, high
            record[f"auroc_diff_{baseline}"] = None if interval is None else (low + high) / 2
        records.append(record)
    return pd.DataFrame(records)


def test_each_model_meets_the_strongest_baseline_that_reads_nothing_it_does_not():
    table = peer_table(
        [
            ("seq", "transformer", "sequence", False, 0.80, None, (0.01, 0.05)),
            ("seq_distance", "transformer", "sequence+distance", False, 0.85, "0.7000;0.8600", (0.01, 0.05)),
            ("seq_pooled", "transformer", "sequence", True, 0.82, "0.8000;0.9000", (0.01, 0.05)),
            ("weak", "transformer", "sequence", False, 0.60, None, (-0.2, -0.1)),
            ("close", "transformer", "sequence", False, 0.71, None, (-0.02, 0.04)),
            ("one_class", "transformer", "sequence", False, 0.71, None, (np.nan, np.nan)),
            ("distance", "baseline", "distance", False, 0.90, None, None),  # the best: reads distance only
            ("kmer", "baseline", "sequence", False, 0.70, None, None),
            ("distance_kmer", "baseline", "sequence+distance", False, 0.75, None, None),
            ("kmer_pooled", "baseline", "sequence", True, 0.65, None, None),  # pooled, but weaker than kmer
        ]
    )
    table = with_peer_columns(table).set_index("model")
    assert table.loc[table["kind"] == "baseline", PEER_COLUMNS].isna().all().all()
    assert table["peer_baseline"].dropna().to_dict() == {
        "seq": "kmer",  # distance scores higher, but a sequence-only model does not read it
        "seq_distance": "distance",  # reads less than the model, and scores highest of those it may meet
        "seq_pooled": "kmer",  # the per-cell-line k-mers beat the pooled ones: the stronger bar
        "weak": "kmer",
        "close": "kmer",
        "one_class": "kmer",
    }
    assert table["peer_verdict"].dropna().to_dict() == {
        "seq": "above",  # one model: the interval decides
        "seq_distance": "tie: replicates",  # the interval excludes 0, but both replicates lie below distance's 0.90
        "seq_pooled": "above",  # every replicate above kmer's 0.70
        "weak": "below",
        "close": "tie: interval",
        "one_class": "no interval",
    }
    lines = peer_markdown(table.reset_index().assign(bootstrap_unit="promoter"))
    assert "| c | seq | sequence | kmer | 0.700 | 0.800 | +0.030 [+0.010, +0.050] | above |" in lines
    assert "whole promoter groups" in "\n".join(lines)


def test_a_pooled_model_meets_the_pooled_baseline_where_it_is_the_stronger():
    table = peer_table(
        [
            ("seq_pooled", "transformer", "sequence", True, 0.82, None, (0.01, 0.05)),
            ("kmer", "baseline", "sequence", False, 0.70, None, None),
            ("kmer_pooled", "baseline", "sequence", True, 0.72, None, None),
            ("distance_kmer_pooled", "baseline", "sequence+distance", True, 0.75, None, None),  # reads distance
        ]
    )
    assert with_peer_columns(table)["peer_baseline"].tolist()[0] == "kmer_pooled"


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


def test_spread_verdict_says_above_or_below_only_when_every_replicate_is():
    assert spread_verdict([0.70, 0.72, 0.74], 0.69) == "every replicate above"
    assert spread_verdict([0.70, 0.72, 0.74], 0.75) == "every replicate below"
    assert spread_verdict([0.70, 0.72, 0.74], 0.71) == "within the spread"
    assert spread_verdict([0.70, 0.72, 0.74], 0.70) == "within the spread"  # a tie is not beyond the spread
    assert spread_verdict([0.72], 0.5) == ""  # one model has no spread
    # Replicates are stored to 4 decimals: a bar that rounds to the lowest one ties with it.
    assert spread_verdict([0.7, 0.72], 0.70000004) == "within the spread"
    assert spread_verdict([0.7, 0.72], 0.69994) == "every replicate above"


def test_replicates_section_sets_each_model_against_the_best_baseline_of_its_cell_line():
    def row(cell, model, kind, auroc, replicates=None):
        values = replicates or []
        return {
            "cell_line": cell,
            "model": model,
            "kind": kind,
            "auroc": auroc,
            "auprc": 0.5,
            "replicates": len(values) or None,
            "replicate_auroc_mean": float(np.mean(values)) if values else None,
            "replicate_auroc_sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            "replicate_auprc_mean": 0.5 if values else None,
            "replicate_auprc_sd": 0.01 if values else None,
            "replicate_aurocs": ";".join(f"{v:.4f}" for v in values) if values else None,
        }

    table = pd.DataFrame(
        [
            row("a", "linear", "transformer", 0.80, [0.78, 0.79, 0.81]),
            row("a", "distance", "baseline", 0.70),
            row("a", "kmer", "baseline", 0.75),
            row("b", "linear", "transformer", 0.60, [0.58, 0.66, 0.62]),
            row("b", "distance", "baseline", 0.61),
            row("b", "kmer", "baseline", 0.55),
        ]
    )
    assert best_baseline(table, "a") == ("kmer", 0.75)
    assert best_baseline(table, "b") == ("distance", 0.61)
    assert best_baseline(table, "b", ["kmer"]) == ("kmer", 0.55)
    assert best_baseline(table[table["kind"] == "transformer"], "a") is None
    unscored = table.assign(auroc=np.where(table["model"] == "kmer", np.nan, table["auroc"]))
    assert best_baseline(unscored, "a") == ("distance", 0.70)  # a baseline without an AUROC is no bar
    assert best_baseline(unscored, "a", ["kmer"]) is None
    assert replicate_values(next(table.itertuples())) == [0.78, 0.79, 0.81]
    lines = replicates_markdown(table)
    [line_a] = [line for line in lines if line.startswith("| a | linear")]
    [line_b] = [line for line in lines if line.startswith("| b | linear")]
    assert line_a.endswith("| kmer 0.750: every replicate above |")
    assert line_b.endswith("| distance 0.610: within the spread |")
    peers = table.assign(peer_baseline=np.where(table["kind"] == "transformer", "kmer", None))
    [line_b] = [line for line in replicates_markdown(peers) if line.startswith("| b | linear")]
    assert line_b.endswith("| kmer 0.550: every replicate above |")  # its peer, not the best of all


def test_a_span_model_is_compared_with_its_length_control_and_the_summary_says_whether_it_gains(tmp_path):
    labels, model, baseline = shared_difficulty(n=150)
    ids = np.arange(150)
    span = {"input": "span", "stem": "conv", "pool": "max"}
    results = [
        make_result(tmp_path, "x", "span", ids, labels, model, attention="linear", **span),
        make_result(tmp_path, "x", "span_ctl", ids, labels, baseline, attention="linear", **span, between="shuffled"),
        # Another span model whose settings differ beyond `between`: not span's control, and without one itself.
        make_result(tmp_path, "x", "other", ids, labels, model, attention="softmax", **span),
        make_result(tmp_path, "x", "distance", ids, labels, baseline[::-1].copy()),
    ]
    paths = [tmp_path / name for name in ("summary.tsv", "summary.md", "paired.tsv")]
    write_summary(results, *paths, resamples=100, seed=0)
    summary = pd.read_csv(paths[0], sep="\t").set_index("model")
    paired = pd.read_csv(paths[2], sep="\t")
    assert pd.isna(summary.loc["distance", "between"])  # a baseline reads no span
    assert list(summary.loc[["span", "span_ctl", "other"], "between"]) == ["sequence", "shuffled", "sequence"]
    controls = paired[paired["reference"] == "length_control"]
    assert sorted(set(zip(controls["model"], controls["baseline"]))) == [("span", "span_ctl")]
    for metric, score in METRICS.items():
        row = controls[controls["metric"] == metric].iloc[0]
        assert row["difference"] == pytest.approx(score(labels, model) - score(labels, baseline), abs=1e-4)
        assert summary.loc["span", f"{metric}_diff_length_control"] == pytest.approx(row["difference"], abs=1e-4)
        assert summary.loc["span", f"{metric}_diff_length_control_lo"] == row["lo"]
    assert summary[["auroc_diff_length_control"]].drop(index="span").isna().all().all()
    markdown = paths[1].read_text()
    assert "## Span models against their length control" in markdown
    line = next(line for line in markdown.splitlines() if line.startswith("| x | span | ") and "span_ctl" in line)
    assert line.endswith("| yes |") == (controls[controls["metric"] == "auroc"]["lo"].item() > 0)
    # The control is not a baseline: no "vs span_ctl" line in the baselines' table.
    assert "span vs span_ctl" not in markdown
