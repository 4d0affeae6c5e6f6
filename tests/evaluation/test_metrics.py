import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score

from epiformer.evaluation.metrics import (
    best_f1_threshold,
    bootstrap_interval,
    bootstrap_rows,
    compute_metrics,
    dependence_groups,
    fast_average_precision,
    fast_roc_auc,
    paired_bootstrap_difference,
)
from tests.helpers import independent_paired_interval, shared_difficulty

METRICS = {"auroc": roc_auc_score, "auprc": average_precision_score}


def scored(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.25
    scores = np.clip(rng.normal(0.3 + 0.3 * labels, 0.2), 0, 1)
    return pd.DataFrame({"pair_id": range(n), "label": labels.astype(int), "score": scores})


def test_metrics_equal_scikit_learn_with_the_validation_threshold():
    test, val = scored(400, 0), scored(300, 1)
    metrics = compute_metrics(test, val, resamples=200, seed=0)
    threshold = best_f1_threshold(val["label"], val["score"])
    assert metrics["threshold"] == threshold
    assert metrics["auroc"] == pytest.approx(roc_auc_score(test["label"], test["score"]))
    assert metrics["auprc"] == pytest.approx(average_precision_score(test["label"], test["score"]))
    assert metrics["f1"] == pytest.approx(f1_score(test["label"], test["score"] >= threshold))
    assert metrics["mcc"] == pytest.approx(matthews_corrcoef(test["label"], test["score"] >= threshold))
    assert metrics["positives"] + metrics["negatives"] == metrics["n_test"] == 400
    low, high = metrics["auroc_ci95"]
    assert low < metrics["auroc"] < high and high - low < 0.2


def test_best_f1_threshold_separates_perfect_scores():
    labels = np.array([0, 0, 1, 1])
    assert best_f1_threshold(labels, np.array([0.1, 0.2, 0.8, 0.9])) == 0.8


def independent_interval(labels, scores, metric, resamples, seed):
    """The percentile 95% interval recomputed apart from evaluation.metrics: seeded draws holding both classes."""
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(labels), len(labels)) for _ in range(resamples)]
    values = [metric(labels[rows], scores[rows]) for rows in draws if 0 < labels[rows].sum() < len(rows)]
    return list(np.percentile(values, [2.5, 97.5]))


def test_bootstrap_is_seeded_and_another_seed_draws_other_resamples():
    test = scored(200, 2)
    labels, scores = test["label"].to_numpy(), test["score"].to_numpy()
    first = compute_metrics(test, None, 100, seed=4)
    assert compute_metrics(test, None, 100, seed=4) == first
    other = compute_metrics(test, None, 100, seed=5)
    for name, metric in METRICS.items():
        assert first[f"{name}_ci95"] == pytest.approx(independent_interval(labels, scores, metric, 100, 4), abs=1e-12)
        assert other[f"{name}_ci95"] == pytest.approx(independent_interval(labels, scores, metric, 100, 5), abs=1e-12)
        assert other[f"{name}_ci95"] != first[f"{name}_ci95"]
    point = {key: value for key, value in first.items() if not key.endswith("_ci95")}
    assert {key: value for key, value in other.items() if not key.endswith("_ci95")} == point  # no seed in these


def test_fast_metrics_equal_scikit_learn_with_ties_and_duplicated_rows():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 300))
        labels = rng.integers(0, 2, n)
        if labels.sum() in (0, n):
            continue
        scores = np.round(rng.random(n) + 0.3 * labels, int(rng.integers(1, 4)))  # many ties
        rows = rng.integers(0, n, n)  # a bootstrap resample: duplicated rows
        if labels[rows].sum() in (0, n):
            continue
        for fast, reference in ((fast_roc_auc, roc_auc_score), (fast_average_precision, average_precision_score)):
            assert fast(labels[rows], scores[rows]) == pytest.approx(reference(labels[rows], scores[rows]), abs=1e-12)


@pytest.mark.parametrize("name", METRICS)
def test_point_difference_is_scikit_learns_and_interval_comes_from_paired_resamples(name):
    labels, model, baseline = shared_difficulty()
    metric = METRICS[name]
    result = paired_bootstrap_difference(labels, model, baseline, metric, resamples=300, seed=3)
    assert result["difference"] == pytest.approx(metric(labels, model) - metric(labels, baseline), abs=1e-12)
    (low, high), kept = independent_paired_interval(labels, model, baseline, metric, 300, 3)
    assert (result["lo"], result["hi"]) == pytest.approx((low, high), abs=1e-12) and result["resamples_used"] == kept


@pytest.mark.parametrize("name", METRICS)
def test_resamples_without_both_classes_are_skipped(name):
    labels = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0, 0])  # about one resample in nine draws no positive
    model, baseline = np.random.default_rng(0).random((2, 10))
    result = paired_bootstrap_difference(labels, model, baseline, METRICS[name], resamples=400, seed=2)
    (low, high), kept = independent_paired_interval(labels, model, baseline, METRICS[name], 400, 2)
    assert result["resamples_used"] == kept < 380
    assert (result["lo"], result["hi"]) == pytest.approx((low, high), abs=1e-12)


@pytest.mark.parametrize("name", METRICS)
def test_identical_scores_give_exactly_zero(name):
    labels, model, _ = shared_difficulty()
    result = paired_bootstrap_difference(labels, model, model.copy(), METRICS[name], resamples=200, seed=0)
    assert (result["difference"], result["lo"], result["hi"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("name", METRICS)
def test_pairing_finds_a_difference_that_overlapping_separate_intervals_hide(name):
    labels, model, baseline = shared_difficulty()
    metric = METRICS[name]
    model_lo, model_hi = bootstrap_interval(labels, model, metric, 500, seed=1)
    baseline_lo, baseline_hi = bootstrap_interval(labels, baseline, metric, 500, seed=1)
    assert model_lo < baseline_hi and baseline_lo < model_hi  # the separate intervals overlap
    paired = paired_bootstrap_difference(labels, model, baseline, metric, resamples=500, seed=1)
    assert paired["lo"] > 0  # yet the model is better on the same pairs
    # Unpaired resampling (independent draws for each) blurs the difference: its interval is wider.
    rng = np.random.default_rng(1)
    unpaired = []
    for _ in range(500):
        rows_a, rows_b = rng.integers(0, len(labels), (2, len(labels)))
        unpaired.append(metric(labels[rows_a], model[rows_a]) - metric(labels[rows_b], baseline[rows_b]))
    unpaired_lo, unpaired_hi = np.percentile(unpaired, [2.5, 97.5])
    assert paired["hi"] - paired["lo"] < 0.5 * (unpaired_hi - unpaired_lo)


def test_seed_changes_the_interval_and_the_same_seed_reproduces_it():
    labels, model, baseline = shared_difficulty()
    first = paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=5)
    assert paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=5) == first
    other = paired_bootstrap_difference(labels, model, baseline, roc_auc_score, resamples=100, seed=6)
    assert (other["lo"], other["hi"]) != (first["lo"], first["hi"])
    assert other["difference"] == first["difference"]  # the point difference does not depend on the seed


def independent_grouped_interval(labels, scores, metric, groups, resamples, seed):
    """The clustered interval recomputed apart from evaluation.metrics: each draw takes the groups' rows in a loop."""
    rng = np.random.default_rng(seed)
    names = list(dict.fromkeys(groups.tolist()))  # groups in order of first appearance
    rows_of = {name: np.flatnonzero(groups == name) for name in names}
    values = []
    for _ in range(resamples):
        rows = np.concatenate([rows_of[names[index]] for index in rng.integers(0, len(names), len(names))])
        if 0 < labels[rows].sum() < len(rows):
            values.append(metric(labels[rows], scores[rows]))
    return list(np.percentile(values, [2.5, 97.5]))


@pytest.mark.parametrize("name", list(METRICS))
def test_grouped_interval_equals_a_loop_over_the_groups(name):
    test = scored(300, 6)
    labels, scores = test["label"].to_numpy(), test["score"].to_numpy()
    groups = np.random.default_rng(7).integers(0, 40, len(labels)) * 3 + 5  # 40 groups, labels not 0..39
    metric = METRICS[name]
    grouped = bootstrap_interval(labels, scores, metric, 200, 3, groups)
    assert grouped == pytest.approx(independent_grouped_interval(labels, scores, metric, groups, 200, 3), abs=1e-12)
    assert grouped != pytest.approx(bootstrap_interval(labels, scores, metric, 200, 3), abs=1e-6)


def test_one_pair_a_group_is_the_pair_bootstrap():
    labels = scored(150, 8)["label"].to_numpy()
    pairs = list(bootstrap_rows(labels, 50, 2))
    singletons = list(bootstrap_rows(labels, 50, 2, np.arange(len(labels))))
    assert len(pairs) == len(singletons) and all(np.array_equal(a, b) for a, b in zip(pairs, singletons))


@pytest.mark.parametrize("name", list(METRICS))
def test_groups_of_copies_widen_the_interval_back_to_the_originals(name):
    """Four copies of each pair are no more evidence than one: the pair bootstrap of the copies is about half as
    wide as the originals' (sqrt(4)); resampling each pair's copies together gives the originals' interval exactly."""
    test = scored(200, 9)
    labels, scores = test["label"].to_numpy(), test["score"].to_numpy()
    copies, metric = 4, METRICS[name]
    copied_labels, copied_scores = np.repeat(labels, copies), np.repeat(scores, copies)
    original = bootstrap_interval(labels, scores, metric, 300, 1)
    naive = bootstrap_interval(copied_labels, copied_scores, metric, 300, 1)
    grouped = bootstrap_interval(copied_labels, copied_scores, metric, 300, 1, np.repeat(np.arange(200), copies))
    assert grouped == pytest.approx(original, abs=1e-12)
    width = original[1] - original[0]
    assert 0.35 * width < naive[1] - naive[0] < 0.7 * width


def test_paired_difference_draws_whole_groups_for_both_models():
    test = scored(240, 10)
    labels, a = test["label"].to_numpy(), test["score"].to_numpy()
    b = np.clip(a + np.random.default_rng(11).normal(0, 0.1, len(a)), 0, 1)
    groups = np.arange(len(labels)) // 6
    paired = paired_bootstrap_difference(labels, a, b, roc_auc_score, 200, 0, groups)
    rows = list(bootstrap_rows(labels, 200, 0, groups))
    expected = np.percentile(
        [roc_auc_score(labels[r], a[r]) - roc_auc_score(labels[r], b[r]) for r in rows], [2.5, 97.5]
    )
    assert [paired["lo"], paired["hi"]] == pytest.approx(list(expected), abs=1e-12)
    assert paired["resamples_used"] == len(rows)


def windows_table(enhancers, promoters):
    """windows.tsv rows for (enhancer, promoter) element numbers: element k is chr1:k*1000-(k*1000+200)."""

    def element(prefix, numbers):
        numbers = np.asarray(numbers)
        return {f"{prefix}_chrom": "chr1", f"{prefix}_start": numbers * 1000, f"{prefix}_end": numbers * 1000 + 200}

    return pd.DataFrame({**element("enhancer", enhancers), **element("promoter", promoters)})


def together(groups) -> list[list[bool]]:
    """Whether each two rows are in one group: what a grouping means, whatever numbers it gives the groups."""
    groups = np.asarray(groups)
    return (groups[:, None] == groups[None, :]).tolist()


def test_dependence_groups_join_pairs_by_shared_elements():
    # Pairs 0-1 share promoter 50; pair 2 shares enhancer 1 with pair 1; pair 3 stands alone; 4-5 share promoter 60.
    promoters = [50, 50, 70, 80, 60, 60]
    windows = windows_table([0, 1, 1, 2, 3, 4], promoters)
    assert together(dependence_groups(windows, "promoter")) == together(promoters)
    assert together(dependence_groups(windows, "element")) == together([0, 0, 0, 1, 2, 2])
    assert list(dependence_groups(windows, "pair")) == list(range(6))
    with pytest.raises(ValueError, match="bootstrap unit 'gene'"):
        dependence_groups(windows, "gene")


def test_metrics_json_intervals_resample_the_promoters_named_in_windows():
    """The model reads some promoters right and others wrong, so the pairs of a promoter are right or wrong together
    and the promoters, not the pairs, are the independent observations: the interval must widen."""
    rng = np.random.default_rng(12)
    promoters = np.arange(300) // 10  # 30 promoters, 10 pairs each
    labels = (rng.random(300) < 0.3).astype(int)
    read_right = (rng.random(30) < 0.75)[promoters]
    scores = np.where(read_right, labels, 1 - labels) + rng.normal(0, 0.5, 300)
    test = pd.DataFrame({"pair_id": np.arange(300) + 1000, "label": labels, "score": scores})
    windows = windows_table(np.arange(300), promoters).assign(pair_id=test["pair_id"])[::-1]  # order does not matter
    by_pair = compute_metrics(test, None, 300, 0)
    by_promoter = compute_metrics(test, None, 300, 0, windows, "promoter")
    assert (by_pair["bootstrap_unit"], by_pair["bootstrap_groups"]) == ("pair", 300)
    assert (by_promoter["bootstrap_unit"], by_promoter["bootstrap_groups"]) == ("promoter", 30)
    expected = bootstrap_interval(labels, test["score"].to_numpy(), roc_auc_score, 300, 0, promoters)
    assert by_promoter["auroc_ci95"] == pytest.approx(expected, abs=1e-12)
    widths = [metrics["auroc_ci95"][1] - metrics["auroc_ci95"][0] for metrics in (by_pair, by_promoter)]
    assert widths[1] > 1.3 * widths[0]
    with pytest.raises(ValueError, match="pair_id 1000 .1 in all."):
        compute_metrics(test, None, 50, 0, windows[windows["pair_id"] != 1000], "promoter")
