"""The real-data benchmark (config/targetfinder.yaml) run the way a user runs it: a dry run of
everything, another sample sheet passed as one more --configfile, and a short real training."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.helpers import REPO, TINY_MODEL, job_counts, require_bedtools, run_workflow, snakemake

OVERLAY = REPO / "config" / "targetfinder.yaml"
CELLS = ("GM12878", "HUVEC", "HeLa-S3", "IMR90")


def user_folder(tmp_path):
    """A user's folder: the checkout's config/ and data/ (links), results written here."""
    for name in ("config", "data"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def test_the_overlay_plans_four_cell_lines_every_model_and_the_genome_build(tmp_path):
    run = snakemake(user_folder(tmp_path), "-s", str(REPO / "Snakefile"), "--configfile", str(OVERLAY), "-n")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    models = yaml.safe_load(OVERLAY.read_text())["models"]
    pooled = [name for name, m in models.items() if m.get("pooled")]
    counts = job_counts(run.stdout + run.stderr)
    assert counts["targetfinder_genome"] == 1 and "index_genome" not in counts
    assert counts["windows"] == counts["encode"] == len(CELLS)
    replicates = yaml.safe_load(OVERLAY.read_text())["train"]["replicates"]
    assert replicates >= 3  # the published table gives each M7 model's spread over replicates
    # M7 (linear attention) replicated, its softmax twins trained once (their own `replicates: 1`).
    replicated = {name for name, m in models.items() if m.get("replicates", replicates) > 1}
    assert replicated == {name for name, m in models.items() if m["attention"] == "linear"}
    per_cell = len(models) - len(pooled)
    replicated_per_cell = len(replicated - set(pooled))
    assert counts["train_replicate"] == len(CELLS) * replicated_per_cell * replicates
    assert counts["train"] == len(CELLS) * (per_cell - replicated_per_cell)
    assert counts["train_pooled_replicate"] == len(replicated & set(pooled)) * replicates
    assert counts["train_pooled"] == len(set(pooled) - replicated)
    assert counts["ensemble"] == len(CELLS) * replicated_per_cell
    assert counts["ensemble_pooled"] == len(replicated & set(pooled))
    assert counts["evaluate_replicated"] == len(CELLS) * len(replicated)
    assert counts["evaluate"] == len(CELLS) * (len(models) - len(replicated)) and counts["transfer"] == per_cell
    assert counts["validate"] == len(CELLS) * len(models) and counts["selection"] == 1
    assert {m["attention"] for m in models.values()} == {"linear", "softmax"}
    assert any(m.get("distance") for m in models.values()) and any(not m.get("distance") for m in models.values())


def test_the_random_split_overlay_trains_each_model_once(tmp_path):
    # As `make real-random` runs it: after targetfinder.yaml's 3 replicates, one model each.
    random_overlay = REPO / "config" / "targetfinder_random.yaml"
    target = "results/HUVEC/linear/metrics.json"
    run = snakemake(
        user_folder(tmp_path), "-s", str(REPO / "Snakefile"), target,
        "--configfile", str(OVERLAY), str(random_overlay), "-n",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = job_counts(run.stdout + run.stderr)
    assert counts["train"] == 1 and counts["evaluate"] == 1
    assert "train_replicate" not in counts and "ensemble" not in counts


def test_the_attentions_overlay_changes_only_the_attention_and_trains_every_attention_alike(tmp_path):
    # As `make real-attentions` runs it: linear, DeltaNet and Gated DeltaNet, sequence-only and with distance.
    attentions_overlay = REPO / "config" / "targetfinder_attentions.yaml"
    added = yaml.safe_load(attentions_overlay.read_text())["models"]
    m7 = yaml.safe_load(OVERLAY.read_text())["models"]
    for name, model in added.items():
        twin = m7["linear_distance" if model["distance"] else "linear"]
        assert {key: value for key, value in model.items() if model[key] != twin.get(key)} == {
            "attention": model["attention"]
        }, name
    models = ["linear", "linear_distance", *added]
    targets = [f"results/{cell}/{model}/metrics.json" for cell in CELLS for model in models]
    run = snakemake(
        user_folder(tmp_path), "-s", str(REPO / "Snakefile"), *targets,
        "--configfile", str(OVERLAY), str(attentions_overlay), "-n",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = job_counts(run.stdout + run.stderr)
    # One model each (the overlay's train.replicates: 1), every attention alike.
    assert yaml.safe_load(attentions_overlay.read_text())["train"]["replicates"] == 1
    assert counts["train"] == counts["evaluate"] == len(CELLS) * len(models)
    assert "train_replicate" not in counts and "ensemble" not in counts


def test_another_sheet_on_the_same_genome_runs_unchanged_as_one_more_configfile(tmp_path):
    folder = user_folder(tmp_path)
    sheet = tmp_path / "other_cells.tsv"
    sheet.write_text(
        "cell_line\tpairs\tgenome\nK562\tdata/targetfinder/IMR90.pairs.csv\thg19\n"
        "NHEK\tdata/targetfinder/HeLa-S3.pairs.csv\thg19\n"
    )
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({"samples": str(sheet)}))
    run = snakemake(
        folder, "-s", str(REPO / "Snakefile"), "--configfile", str(OVERLAY), str(tmp_path / "other.yaml"), "-n"
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    planned = run.stdout + run.stderr
    assert "results/K562/windows.tsv" in planned and "results/NHEK/windows.tsv" in planned
    assert "results/GM12878" not in planned
    assert job_counts(planned)["windows"] == 2


def test_a_short_real_data_training_runs_and_writes_metrics(tmp_path):
    require_bedtools()
    folder = user_folder(tmp_path)
    # Small and short; the distance-aware entry shrinks with its sequence-only twin, as the config requires.
    short = {
        "models": {"linear": {**TINY_MODEL, "distance": False}, "linear_distance": {**TINY_MODEL, "distance": True}},
        "train": {"epochs": 2, "replicates": 1},
        "evaluate": {"bootstrap": 20},
    }
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(short))
    targets = [f"results/IMR90/{name}/metrics.json" for name in ("linear", "linear_distance", "distance")]
    run_workflow(
        folder, "-s", str(REPO / "Snakefile"), *targets, "--configfile", str(OVERLAY), str(tmp_path / "short.yaml")
    )
    results = tmp_path / "results" / "IMR90"
    report = json.loads((results / "windows_stats.json").read_text())
    assert report["pairs_in"] == 1683 and report["pairs_kept"] == 1683  # 200-bp windows: every base is real
    assert report["splits"]["test"]["pairs"] > 100
    log = pd.read_csv(results / "linear" / "train_log.tsv", sep="\t")
    assert len(log) == 2 and log["val_auroc"].between(0, 1).all()
    metrics = json.loads((results / "linear" / "metrics.json").read_text())
    assert metrics["split"]["mode"] == "chromosome" and 0 <= metrics["auroc"] <= 1
    test_ids = set(pd.read_csv(results / "linear" / "predictions.tsv", sep="\t")["pair_id"])
    assert test_ids == set(pd.read_csv(results / "distance" / "predictions.tsv", sep="\t")["pair_id"])
    windows = pd.read_csv(results / "windows.tsv", sep="\t")
    assert set(windows.loc[windows["split"] == "test", "enhancer_chrom"]) <= {"chr8", "chr9"}
    assert metrics["n_test"] == len(test_ids) == (windows["split"] == "test").sum()
    aware = json.loads((results / "linear_distance" / "metrics.json").read_text())
    assert aware["n_test"] == metrics["n_test"]


@pytest.mark.parametrize("cell", CELLS)
def test_sample_sheet_lists_the_shipped_pairs(cell):
    sheet = pd.read_csv(REPO / "config" / "targetfinder.tsv", sep="\t")
    assert list(sheet.columns) == ["cell_line", "pairs", "genome"]
    row = sheet.set_index("cell_line").loc[cell]
    assert (REPO / row["pairs"]).exists() and row["genome"] == "hg19"


def test_a_span_model_keeps_every_targetfinder_pair_and_encodes_them_on_the_real_data_genome(tmp_path):
    """Real distances (up to 1.9 Mb) at the default windows.max_span: windows and span encoding of 300 pairs of
    TargetFinder's full IMR90 table, the longest included, on the shipped hg19-size genome; the genome store
    holds each base once, at half a byte, and the span shards coordinates only."""
    require_bedtools()
    folder = user_folder(tmp_path)
    full = pd.read_csv(REPO / "data" / "targetfinder-full" / "IMR90.pairs.csv.gz")
    span = full[["enhancer_end", "promoter_end"]].max(axis=1) - full[["enhancer_start", "promoter_start"]].min(axis=1)
    by_span = span.sort_values().index
    picks = [by_span[full.loc[by_span, "label"] == label] for label in (0, 1)]  # every distance, of each class
    chosen = pd.concat([full.loc[index[:: max(1, len(index) // 150)]] for index in picks] + [full.loc[[span.idxmax()]]])
    chosen = chosen.drop_duplicates()
    chosen.to_csv(tmp_path / "IMR90.full.csv", index=False)
    (tmp_path / "sheet.tsv").write_text(f"cell_line\tpairs\tgenome\nIMR90\t{tmp_path / 'IMR90.full.csv'}\thg19\n")
    overlay = {
        "samples": str(tmp_path / "sheet.tsv"),
        "windows": {"enhancer_width": 200, "promoter_width": 200, "max_n_fraction": 1.0},  # most elements are N here
        "models": {"span": {**TINY_MODEL, "attention": "linear", "input": "span", "patch_size": 128,
                            "kernel_size": 11, "stem": "conv_tower"}},
    }  # fmt: skip
    (tmp_path / "span.yaml").write_text(yaml.safe_dump(overlay))
    run_workflow(
        folder, "-s", str(REPO / "Snakefile"), "results/IMR90/span_shards", "--configfile", str(OVERLAY),
        str(tmp_path / "span.yaml"), timeout=1200,
    )  # fmt: skip
    stats = json.loads((tmp_path / "results" / "IMR90" / "windows_stats.json").read_text())
    assert stats["windows"]["max_span"] == 2_100_000 and stats["pairs_kept"] == stats["pairs_in"] == len(chosen)
    manifest = json.loads((tmp_path / "results" / "IMR90" / "span_shards" / "manifest.json").read_text())
    assert sum(entry["rows"] for entry in manifest["shards"]) == len(chosen)
    assert max(entry["bases"] for entry in manifest["shards"]) > 1_800_000  # the longest span, 1.88 Mb, is there
    store = tmp_path / "results" / "genomes" / "hg19" / "store"
    sizes = pd.read_csv(REPO / "data" / "targetfinder" / "hg19.chrom.sizes", sep="\t", header=None)
    packed = sum(path.stat().st_size for path in store.glob("chrom-*.u8"))
    assert packed == sum((length + 1) // 2 for length in sizes[1])  # each base once: 1.0 x the genome at 4 bits
    shards = sum(
        path.stat().st_size for path in (tmp_path / "results" / "IMR90" / "span_shards").rglob("*.safetensors")
    )
    assert shards < 200 * len(chosen)
