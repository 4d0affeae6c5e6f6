import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score
from sklearn.preprocessing import StandardScaler

from epiformer.data.genome import Genome
from epiformer.data.shards import ShardError, load_split
from epiformer.data.splits import SplitSpec
from epiformer.evaluation.baselines import (
    C_GRIDS,
    base_codes,
    baseline_features,
    canonical_kmer_columns,
    distance_features,
    fit_logistic,
    kmer_features,
    kmer_frequencies,
    run_baseline,
    run_pooled_baseline,
    split_tables,
)
from epiformer.io.files import read_windows
from epiformer.sequence.onehot import one_hot
from tests.helpers import REPO, snakemake, windows_and_shards

BASELINES = ("distance", "kmer", "distance_kmer", "propensity")
CHROMOSOME_SPLIT = SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",))


def run(folder, name, **options):
    out = folder / name
    metrics = run_baseline(
        name,
        folder / "windows.tsv",
        folder / "shards",
        out / "predictions.tsv",
        out / "metrics.json",
        resamples=50,
        **options,
    )
    return metrics, pd.read_csv(out / "predictions.tsv", sep="\t")


@pytest.fixture(scope="module")
def tiny_run(tiny_demo, tmp_path_factory):
    return windows_and_shards(tiny_demo, "demo_a", CHROMOSOME_SPLIT, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tiny_run_b(tiny_demo, tmp_path_factory):
    return windows_and_shards(tiny_demo, "demo_b", CHROMOSOME_SPLIT, tmp_path_factory.mktemp("tiny_b"))


def run_pooled(folders, name, out, **options):
    """run_pooled_baseline over the cell lines in `folders` (windows.tsv and shards/ each), written under `out`."""
    every = run_pooled_baseline(
        name,
        [folder / "windows.tsv" for folder in folders],
        [folder / "shards" for folder in folders],
        [out / str(index) / "predictions.tsv" for index in range(len(folders))],
        [out / str(index) / "metrics.json" for index in range(len(folders))],
        resamples=50,
        **options,
    )
    return every, [pd.read_csv(out / str(index) / "predictions.tsv", sep="\t") for index in range(len(folders))]


def codes_of(sequence: bytes) -> np.ndarray:
    return base_codes(one_hot([sequence]))


def test_kmers_are_canonical_frequencies_that_skip_n():
    assert [canonical_kmer_columns(k)[1] for k in (1, 2, 4, 5)] == [2, 10, 136, 512]
    columns, _ = canonical_kmer_columns(2)
    frequencies = kmer_frequencies(codes_of(b"AAACN"), 2)[0]  # AA, AA, AC; CN skipped
    assert frequencies[columns[0b0000]] == pytest.approx(2 / 3) and frequencies[columns[0b0001]] == pytest.approx(1 / 3)
    assert frequencies[columns[0b1111]] == frequencies[columns[0b0000]]  # TT is AA's reverse complement
    sequence = b"GATTACAGGCCTNNACGTTTAGC"
    reverse_complement = sequence[::-1].translate(bytes.maketrans(b"ACGTN", b"TGCAN"))
    forward, backward = kmer_frequencies(codes_of(sequence), 5), kmer_frequencies(codes_of(reverse_complement), 5)
    np.testing.assert_array_equal(forward, backward)
    assert kmer_frequencies(codes_of(b"NNNNNN"), 3).sum() == 0


def test_kmer_features_are_those_of_the_centred_windows_in_windows_tsv(tiny_demo, tiny_run):
    shards = load_split(tiny_run / "shards", "test")
    windows = read_windows(tiny_run / "windows.tsv").set_index("pair_id")
    features = kmer_features(shards, 3, chunk=7)  # several chunks
    genome = Genome(tiny_demo["genome"])
    rows = windows.loc[shards.pair_id]
    expected = [
        kmer_frequencies(
            base_codes(
                one_hot(
                    [
                        genome.fetch(c, s, e)
                        for c, s, e in zip(rows[f"{el}_chrom"], rows[f"{el}_start"], rows[f"{el}_end"])
                    ]
                )
            ),
            3,
        )
        for el in ("enhancer", "promoter")
    ]
    np.testing.assert_allclose(features, np.hstack(expected))


def test_distance_score_is_monotone_and_learns_that_close_pairs_interact():
    rng = np.random.default_rng(0)
    tables = {}
    for split, n in (("train", 600), ("val", 200), ("test", 200)):
        distance = rng.integers(5_000, 400_000, n)
        label = (rng.random(n) < 1 / (1 + (distance / 50_000) ** 2)).astype(int)
        tables[split] = pd.DataFrame({"distance": distance, "label": label})
    features = {split: distance_features(table) for split, table in tables.items()}
    scores, _ = fit_logistic(features, {split: t["label"].to_numpy() for split, t in tables.items()}, (1.0,))
    order = np.argsort(tables["test"]["distance"].to_numpy())
    assert (np.diff(scores["test"][order]) <= 0).all()
    assert roc_auc_score(tables["test"]["label"], scores["test"]) > 0.7


def test_outputs_have_the_transformer_formats_the_test_pairs_and_sklearn_values(tiny_run):
    test = load_split(tiny_run / "shards", "test")
    windows = read_windows(tiny_run / "windows.tsv").set_index("pair_id")
    for name in BASELINES:
        metrics, predictions = run(tiny_run, name, kmer_size=3)
        assert list(predictions.columns) == ["pair_id", "label", "score"]
        assert predictions["pair_id"].tolist() == sorted(test.pair_id.tolist())
        assert (predictions["label"].to_numpy() == windows.loc[predictions["pair_id"], "label"].to_numpy()).all()
        labels, scores = predictions["label"], predictions["score"]
        predicted = scores >= metrics["threshold"]
        assert metrics["auroc"] == roc_auc_score(labels, scores)
        assert metrics["auprc"] == average_precision_score(labels, scores)
        assert metrics["f1"] == f1_score(labels, predicted) and metrics["mcc"] == matthews_corrcoef(labels, predicted)
        assert (metrics["n_test"], metrics["positives"]) == (len(test), int(test.label.sum()))
        assert metrics["split"] == {"mode": "chromosome", "leak_prone": False}
        assert (metrics["windows"]["enhancer_width"], metrics["windows"]["promoter_width"]) == (64, 48)
        assert metrics["baseline"]["name"] == name
        if name == "distance":
            by_distance = scores.to_numpy()[np.argsort(windows.loc[predictions["pair_id"], "distance"].to_numpy())]
            assert (np.diff(by_distance) <= 0).all() or (np.diff(by_distance) >= 0).all()


def test_distance_kmer_reads_both_and_learns_from_each():
    """One regression on k-mer and distance columns: where the label needs both, it beats each alone."""
    rng = np.random.default_rng(3)
    tables, kmer = {}, {}
    for split, n in (("train", 3000), ("val", 800), ("test", 1500)):
        distance = rng.integers(5_000, 400_000, n)
        motif = rng.random(n) < 0.5  # an element holds a motif: AAAA-rich, else uniform
        codes = rng.integers(0, 4, (n, 120))
        codes[motif, :40] = 0
        logit = 2.5 * motif - 1.5 * np.log10(distance / 50_000)
        label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
        tables[split] = pd.DataFrame({"distance": distance, "label": label})
        kmer[split] = kmer_frequencies(codes, 2)
    both = {split: np.hstack([kmer[split], distance_features(tables[split])]) for split in tables}
    labels = {split: table["label"].to_numpy() for split, table in tables.items()}
    distance_only = {split: distance_features(table) for split, table in tables.items()}
    aurocs = {}
    for name, features in (("kmer", kmer), ("distance", distance_only), ("distance_kmer", both)):
        scores, _ = fit_logistic(features, labels, C_GRIDS[name])
        aurocs[name] = roc_auc_score(labels["test"], scores["test"])
    assert aurocs["distance_kmer"] > max(aurocs["kmer"], aurocs["distance"]) + 0.03, aurocs


def test_distance_kmer_features_are_the_kmer_then_the_distance_columns(tiny_run):
    shards = {split: load_split(tiny_run / "shards", split) for split in ("train", "val", "test")}
    tables = split_tables(read_windows(tiny_run / "windows.tsv"), shards)
    both, description = baseline_features("distance_kmer", tables, shards, 3, 1.0)
    kmer, _ = baseline_features("kmer", tables, shards, 3, 1.0)
    for split in shards:
        assert np.array_equal(both[split][:, :-2], kmer[split])
        assert np.array_equal(both[split][:, -2:], distance_features(tables[split]))
    assert description == {"kmer_size": 3}


def test_runs_are_deterministic(tiny_run, tmp_path):
    first, _ = run(tiny_run, "kmer", kmer_size=3)
    copy = shutil.copytree(tiny_run, tmp_path / "again", ignore=shutil.ignore_patterns("kmer"))
    second, _ = run(copy, "kmer", kmer_size=3)
    assert first == second
    assert (tiny_run / "kmer" / "predictions.tsv").read_bytes() == (copy / "kmer" / "predictions.tsv").read_bytes()


def test_propensity_has_nothing_to_go_on_across_chromosomes(tiny_run):
    metrics, predictions = run(tiny_run, "propensity")
    assert metrics["auroc"] == 0.5 and predictions["score"].nunique() == 1
    described = metrics["baseline"]
    assert described["test_enhancers_seen_in_training"] == 0 == described["test_promoters_seen_in_training"]


def test_windows_that_disagree_with_the_shards_fail_with_a_fix(tiny_run, tmp_path):
    windows = read_windows(tiny_run / "windows.tsv")
    broken = tmp_path / "broken"
    shutil.copytree(tiny_run / "shards", broken / "shards")
    windows[windows["split"] != "test"].to_csv(broken / "windows.tsv", sep="\t", index=False)
    with pytest.raises(ShardError, match="missing.*re-run encode"):
        run(broken, "distance")
    windows.loc[0, "label"] = 1 - windows.loc[0, "label"]
    windows.to_csv(broken / "windows.tsv", sep="\t", index=False)
    with pytest.raises(ShardError, match=f"pair_id {windows.loc[0, 'pair_id']} has another label"):
        run(broken, "distance")
    with pytest.raises(ValueError, match="Unknown baseline 'gc'"):
        run(tiny_run, "gc")


def test_a_pooled_baseline_of_one_cell_line_is_that_cell_lines_baseline(tiny_run, tmp_path):
    for name in BASELINES:
        alone, alone_predictions = run(tiny_run, name, kmer_size=3)
        [pooled], [pooled_predictions] = run_pooled([tiny_run], name, tmp_path / name, kmer_size=3)
        pd.testing.assert_frame_equal(pooled_predictions, alone_predictions)
        described = pooled.pop("baseline")
        assert described == {**alone.pop("baseline"), "pooled": True, "cell_lines": 1}
        assert json.dumps(pooled, sort_keys=True) == json.dumps(alone, sort_keys=True)  # NaN reads equal here


def test_a_pooled_baseline_is_one_fit_on_every_cell_lines_train_pairs(tiny_run, tiny_run_b, tmp_path):
    """Against sklearn on the two cell lines' stacked distance features; each cell line keeps its own test pairs
    and its own threshold, picked on its own validation pairs."""
    folders = (tiny_run, tiny_run_b)
    every, predictions = run_pooled(folders, "distance", tmp_path)
    tables = []
    for folder in folders:
        shards = {split: load_split(folder / "shards", split) for split in ("train", "val", "test")}
        tables.append(split_tables(read_windows(folder / "windows.tsv"), shards))
    train = pd.concat([table["train"] for table in tables])
    scaler = StandardScaler().fit(distance_features(train))
    model = LogisticRegression(C=1.0, max_iter=2000).fit(scaler.transform(distance_features(train)), train["label"])
    for table, metrics, scored, folder in zip(tables, every, predictions, folders):
        test = table["test"].set_index("pair_id").loc[scored["pair_id"]]
        expected = model.predict_proba(scaler.transform(distance_features(test)))[:, 1]
        np.testing.assert_allclose(scored["score"], expected, rtol=1e-9)
        assert scored["pair_id"].tolist() == sorted(load_split(folder / "shards", "test").pair_id.tolist())
        assert metrics["baseline"]["train_pairs"] == len(train) and metrics["baseline"]["cell_lines"] == 2
        alone, _ = run(folder, "distance")
        assert metrics["auroc"] == pytest.approx(roc_auc_score(scored["label"], scored["score"]))
        assert metrics["threshold"] != alone["threshold"]  # another fit, whose threshold its own val pairs pick
    with pytest.raises(ValueError, match="one windows.tsv, shard folder and pair of outputs a cell line"):
        run_pooled_baseline("distance", [tiny_run / "windows.tsv"], [], [], [])


def test_a_pooled_propensity_counts_each_cell_lines_test_elements_seen_in_every_cell_lines_training(
    tiny_demo, tmp_path
):
    """On a random split, where test elements recur in training: each cell line's own seen-fraction, against the
    training pairs of both."""
    folders = [
        windows_and_shards(tiny_demo, cell, SplitSpec(mode="random"), tmp_path / cell) for cell in ("demo_a", "demo_b")
    ]
    every, _ = run_pooled(folders, "propensity", tmp_path / "pooled")
    windows = [read_windows(folder / "windows.tsv") for folder in folders]
    columns = ["enhancer_chrom", "enhancer_start", "enhancer_end"]
    trained = {tuple(row) for table in windows for row in table.loc[table["split"] == "train", columns].to_numpy()}
    seen = [
        np.mean([tuple(row) in trained for row in t.loc[t["split"] == "test", columns].to_numpy()]) for t in windows
    ]
    assert [metrics["baseline"]["test_enhancers_seen_in_training"] for metrics in every] == pytest.approx(seen)
    assert min(seen) > 0 and seen[0] != seen[1]


@pytest.fixture(scope="module")
def full_runs(full_demo, tmp_path_factory):
    """The default demo's demo_a at the workflow's default windows, split by chromosome and at random."""
    root = tmp_path_factory.mktemp("full")
    chromosome = SplitSpec(val_chromosomes=("chr5",), test_chromosomes=("chr6",))
    return {
        split.mode: windows_and_shards(full_demo, "demo_a", split, root / split.mode, (256, 224), 8)
        for split in (chromosome, SplitSpec(mode="random"))
    }


def test_propensity_is_chance_across_chromosomes_but_not_on_a_random_split(full_runs):
    across, _ = run(full_runs["chromosome"], "propensity")
    shared, _ = run(full_runs["random"], "propensity")
    assert 0.4 <= across["auroc"] <= 0.6
    # Element reuse leaks labels (the demo's lone negatives make one element alone say less).
    assert shared["auroc"] > 0.6 and shared["auroc_ci95"][0] > 0.55
    assert shared["baseline"]["test_enhancers_seen_in_training"] > 0.5 and shared["split"]["leak_prone"] is True


def test_kmer_beats_chance_and_distance_but_not_the_motif_pair_oracle(full_demo, full_runs):
    kmer, predictions = run(full_runs["chromosome"], "kmer", kmer_size=4)
    distance, _ = run(full_runs["chromosome"], "distance")
    truth = pd.read_csv(full_demo["demo_a_truth"], sep="\t").set_index("pair_id")
    oracle = roc_auc_score(predictions["label"], truth.loc[predictions["pair_id"], "p_interact"])
    assert kmer["auroc_ci95"][0] > 0.65 and kmer["auroc"] < oracle
    assert 0.4 <= distance["auroc"] <= 0.6  # the demo draws negatives at matched distances


def test_the_rule_runs_the_package_with_the_config_values(tiny_run, tmp_path):
    """The `baseline` rule and its script, run by Snakemake on windows.tsv and shards as the workflow lays them out."""
    shutil.copytree(tiny_run, tmp_path / "results" / "tiny", ignore=shutil.ignore_patterns(*BASELINES))
    (tmp_path / "Snakefile").write_text(
        f'configfile: "{REPO}/config/config.yaml"\n'
        'config["evaluate"]["bootstrap"] = 50\n'
        'CELL_LINES = ["tiny"]\n'
        f'wildcard_constraints:\n    baseline="{"|".join(BASELINES)}"\n'  # as common.smk constrains it
        f'include: "{REPO}/workflow/rules/baselines.smk"\n'
    )
    targets = [f"results/tiny/{name}/metrics.json" for name in BASELINES] + ["results/tiny/kmer_pooled/metrics.json"]
    done = snakemake(tmp_path, *targets, cores=1, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for name in BASELINES:
        assert "test AUROC" in (tmp_path / "logs" / "tiny" / name / "baseline.log").read_text()
        written = json.loads((tmp_path / "results" / "tiny" / name / "metrics.json").read_text())
        again, _ = run(
            tiny_run,
            name,
            kmer_size=config["baselines"]["kmer_size"],
            pseudo_pairs=config["baselines"]["pseudo_pairs"],
            seed=config["evaluate"]["seed"],
            bootstrap_unit=config["evaluate"]["bootstrap_unit"],
        )
        assert written["bootstrap_unit"] == config["evaluate"]["bootstrap_unit"] == "promoter"
        assert written["baseline"] == again["baseline"]  # name, k, smoothing, chosen C, feature count
        assert written["auroc"] == pytest.approx(again["auroc"], abs=1e-6)
        assert written["auroc_ci95"] == pytest.approx(again["auroc_ci95"], abs=1e-6)
    pooled = json.loads((tmp_path / "results" / "tiny" / "kmer_pooled" / "metrics.json").read_text())
    assert (
        "kmer baseline, pooled, on tiny" in (tmp_path / "logs" / "pooled" / "kmer_pooled" / "baseline.log").read_text()
    )
    alone = json.loads((tmp_path / "results" / "tiny" / "kmer" / "metrics.json").read_text())
    assert pooled["baseline"] == {**alone["baseline"], "pooled": True, "cell_lines": 1}
    assert pooled["auroc"] == alone["auroc"]  # one cell line pooled is that cell line
