"""A real Snakemake run of the long demo with span input: element and span models side by side."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from tests.helpers import (
    REPO,
    TINY_LONG_DEMO,
    TINY_MODEL,
    assert_figure,
    copy_workflow,
    job_counts,
    read_fasta,
    run_workflow,
    snakemake,
    tiny_config,
    write_fasta,
)

# As config/demo_long.yaml's span models: an exponential conv stem, max pooling, each element pooled on its own.
SPAN_MODEL = {**TINY_MODEL, "patch_size": 16, "kernel_size": 16, "input": "span"}
SPAN_MODEL.update(stem="conv_exp", pool="max", element_pool=True)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """config/demo_long.yaml's design at test size: M7 on elements, M7 and softmax on spans, one epoch."""
    config = tiny_config()
    config["samples"] = "config/demo_long.tsv"
    config["genomes"] = {"demo_long": "resources/demo_long/genome.fa"}
    config["demo_long"] = {
        "pairs": TINY_LONG_DEMO.pairs,
        "n_chromosomes": 3,
        "max_distance": TINY_LONG_DEMO.max_distance,
    }
    config["windows"].update(max_span=12_000)  # some tiny-demo spans are longer: they are dropped for every model
    config["length_control"] = False  # on for linear_span alone: a model's own setting wins
    config["models"] = {
        "linear": {"attention": "linear", **TINY_MODEL},
        "linear_span": {"attention": "linear", **SPAN_MODEL, "length_control": True},
        "softmax_span": {"attention": "softmax", **SPAN_MODEL},
        "gated_deltanet_span": {"attention": "gated_deltanet", **SPAN_MODEL},  # the delta rules take every tool too
    }
    config["train"].update(max_tokens_per_batch=2_000)
    config["baselines"]["names"] = ["distance"]
    folder = copy_workflow(tmp_path_factory.mktemp("long"), config)
    (folder / "config" / "demo_long.tsv").write_text((REPO / "config" / "demo_long.tsv").read_text())
    run_workflow(folder)
    return folder / "results"


def test_span_models_read_span_shards_and_every_model_the_same_test_pairs(long_run):
    stats = json.loads((long_run / "demo_long" / "windows_stats.json").read_text())
    assert stats["windows"]["max_span"] == 12_000 and stats["dropped"]["span_longer_than_max_span"] > 0
    windows = pd.read_csv(long_run / "demo_long" / "windows.tsv", sep="\t")
    span = windows[["enhancer_end", "promoter_end"]].max(axis=1) - windows[["enhancer_start", "promoter_start"]].min(
        axis=1
    )
    assert span.max() <= 12_000
    manifest = json.loads((long_run / "demo_long" / "span_shards" / "manifest.json").read_text())
    assert manifest["kind"] == "span" and sum(s["rows"] for s in manifest["shards"]) == len(windows)
    # The spans' bases are the genome store's, built once for the genome: shards hold coordinates only.
    store = long_run / "genomes" / "demo_long" / "store"
    assert (long_run / "demo_long" / "span_shards" / manifest["genome_store"]["path"]).resolve() == store.resolve()
    genome_bytes = (long_run.parent / "resources" / "demo_long" / "genome.fa").stat().st_size
    assert sum(path.stat().st_size for path in store.glob("chrom-*.u8")) < 0.55 * genome_bytes  # half a byte a base
    shard_bytes = sum(path.stat().st_size for path in (long_run / "demo_long" / "span_shards").rglob("*.safetensors"))
    assert shard_bytes < 200 * len(windows) < span.sum() / 2  # far below the spans at half a byte a base
    test_ids = set(windows.loc[windows["split"] == "test", "pair_id"])
    for model in ("linear", "linear_span", "softmax_span", "distance"):
        predictions = pd.read_csv(long_run / "demo_long" / model / "predictions.tsv", sep="\t")
        assert set(predictions["pair_id"]) == test_ids
    for model, expected in (("linear", "elements"), ("linear_span", "span"), ("softmax_span", "span")):
        description = json.loads((long_run / "demo_long" / model / "model.json").read_text())
        assert description["model"]["input"] == expected and description["peak_memory_mb"] > 0
        # What a model leaves out is M7's (the linear stem and the mean); what it sets reaches the model.
        readout = ("linear", "mean", False) if expected == "elements" else ("conv_exp", "max", True)
        assert tuple(description["model"][key] for key in ("stem", "pool", "element_pool")) == readout


def test_summary_has_the_input_column_the_ceiling_and_the_cost_figure(long_run):
    summary = pd.read_csv(long_run / "summary.tsv", sep="\t").set_index("model")
    assert summary.loc[["linear", "linear_span", "softmax_span", "distance"], "input"].tolist() == [
        "elements",
        "span",
        "span",
        "elements",
    ]
    # The ceiling a model of the element windows can reach lies below the oracle, on the same test pairs.
    assert (summary["element_ceiling_auroc"] < summary["oracle_auroc"]).all()
    assert summary.loc["linear_span", "train_seconds"] > 0 and summary.loc["softmax_span", "peak_memory_mb"] > 0
    # The pairs max_span dropped, for every model and baseline alike, are counted where results are read.
    stats = json.loads((long_run / "demo_long" / "windows_stats.json").read_text())
    dropped = stats["dropped"]["span_longer_than_max_span"] + stats["dropped"].get("span_across_chromosomes", 0)
    assert dropped > 0 and (summary["dropped_for_span"] == dropped).all()
    assert f"{dropped:,} of {stats['pairs_in']:,} pairs dropped for their span" in (long_run / "summary.md").read_text()
    assert_figure(long_run / "plots" / "cost.png")


def test_the_span_model_has_its_length_control_beside_it_and_only_it(long_run):
    summary = pd.read_csv(long_run / "summary.tsv", sep="\t").set_index("model")
    assert "linear_span_length_control" in summary.index and "softmax_span_length_control" not in summary.index
    assert summary.loc["linear_span", "between"] == "sequence"
    assert summary.loc["linear_span_length_control", "between"] == "shuffled"
    paired = pd.read_csv(long_run / "paired_comparison.tsv", sep="\t")
    control = paired[(paired["reference"] == "length_control") & (paired["metric"] == "auroc")]
    assert list(zip(control["model"], control["baseline"])) == [("linear_span", "linear_span_length_control")]
    assert summary.loc["linear_span", "auroc_diff_length_control"] == pytest.approx(
        summary.loc["linear_span", "auroc"] - summary.loc["linear_span_length_control", "auroc"], abs=1e-3
    )
    description = json.loads((long_run / "demo_long" / "linear_span_length_control" / "model.json").read_text())
    reference = json.loads((long_run / "demo_long" / "linear_span" / "model.json").read_text())
    assert description["model"] == {**reference["model"], "between": "shuffled"}
    assert "Span models against their length control" in (long_run / "summary.md").read_text()
    delta = json.loads((long_run / "demo_long" / "gated_deltanet_span" / "model.json").read_text())
    assert (delta["delta_kernel"], reference["delta_kernel"]) == ("torch", None)  # the default scan; M7 runs none


@pytest.mark.parametrize("model", ["linear_span", "gated_deltanet_span", "linear_span_length_control"])
def test_epiformer_predict_scores_a_span_model_as_the_workflow_did(long_run, tmp_path, model):
    """The whole pairs file through `epiformer predict`: every test pair scored as evaluation scored it (1e-6),
    in batches of another size; pairs whose span is longer than the model's max_span left unscored, by reason."""
    import subprocess
    import sys

    folder = long_run.parent
    model_dir = long_run / "demo_long" / model
    run = subprocess.run(
        # One thread, as the workflow's evaluate job scores: on two threads the conv_exp length control's scores
        # vary between runs by up to 2e-5 (the run's note; one thread gives the same scores every run).
        [sys.executable, "-m", "epiformer.cli", "predict", "--threads", "1", "--model", str(model_dir),
         "--genome", str(folder / "resources/demo_long/genome.fa"),
         "--pairs", str(folder / "resources/demo_long/demo_long.pairs.csv"), "--out", str(tmp_path / "scores.tsv")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "reads spans" in run.stderr
    scores = pd.read_csv(tmp_path / "scores.tsv", sep="\t").set_index("pair_id")["score"]
    workflow = pd.read_csv(model_dir / "predictions.tsv", sep="\t").set_index("pair_id")["score"]
    assert set(workflow.index) <= set(scores.index)
    assert (scores.loc[workflow.index] - workflow).abs().max() < 1e-6
    unscored = pd.read_csv(tmp_path / "scores.unscored.tsv", sep="\t")
    stats = json.loads((long_run / "demo_long" / "windows_stats.json").read_text())
    assert (unscored["reason"] == "span_longer_than_max_span").sum() == stats["dropped"]["span_longer_than_max_span"]
    windows = pd.read_csv(long_run / "demo_long" / "windows.tsv", sep="\t")
    assert sorted(scores.index) == sorted(windows["pair_id"])  # exactly the pairs the windows stage kept


def mutated_fasta(source, target, chrom: str, start: int, alt: str):
    """A copy of FASTA `source` with base `start` (0-based) of `chrom` replaced by `alt`."""
    sequences = read_fasta(source)
    sequences[chrom] = sequences[chrom][:start] + alt + sequences[chrom][start + 1 :]
    return write_fasta(target, sequences)


def test_epiformer_variants_scores_a_span_model_anywhere_in_the_span_as_predict_on_the_mutated_genome(
    long_run, tmp_path
):
    from epiformer.data.genome import Genome
    from epiformer.data.spans import span_coordinates
    from epiformer.scoring.predict import predict_pairs
    from epiformer.scoring.variants import score_variants

    folder = long_run.parent
    genome_path = folder / "resources/demo_long/genome.fa"
    model_dir = long_run / "demo_long" / "linear_span"
    windows = pd.read_csv(long_run / "demo_long" / "windows.tsv", sep="\t")
    pairs = pd.read_csv(folder / "resources/demo_long/demo_long.pairs.csv")
    chosen = windows[windows["split"] == "test"].head(3)
    subset = pairs.loc[chosen["pair_id"]].reset_index(drop=True)  # pair_id: the row in the subset file
    subset.to_csv(tmp_path / "pairs.csv", index=False)
    span = span_coordinates(chosen.reset_index(drop=True)).iloc[0]
    assert span.second_start - span.first_end > 100  # the first pair has bases between its elements
    offsets = {
        "first element": 5,
        "between": (span.first_end + span.second_start) // 2,
        "second element": span.distance - 5,
    }
    with Genome(genome_path) as genome:
        records = []
        for offset in offsets.values():
            position = int(span.span_start + offset)
            ref = genome.fetch(span.chrom, position, position + 1).decode().upper()
            records.append((span.chrom, position, ref, "A" if ref != "A" else "C"))
        sizes = genome.sizes
    far = sizes[span.chrom] - 1  # the chromosome's last base: in no span of the three pairs
    with Genome(genome_path) as genome:
        records.append((span.chrom, far, genome.fetch(span.chrom, far, far + 1).decode().upper(), "G"))
    vcf = tmp_path / "variants.vcf"
    vcf.write_text(
        "##fileformat=VCFv4.2\n"
        + "".join(f"##contig=<ID={name},length={length}>\n" for name, length in sizes.items())
        + "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        + "".join(f"{c}\t{p + 1}\tv{i}\t{r}\t{a}\t.\t.\t.\n" for i, (c, p, r, a) in enumerate(records))
    )
    score_variants(model_dir, genome_path, tmp_path / "pairs.csv", vcf, tmp_path / "variants.tsv")
    rows = pd.read_csv(tmp_path / "variants.tsv", sep="\t")
    first = rows[rows["pair_id"] == 0].set_index("id")
    first_element, second_element = ("enhancer", "promoter") if span.enhancer_first else ("promoter", "enhancer")
    assert first.loc[["v0", "v1", "v2"], "element"].tolist() == [first_element, "between", second_element]
    assert (first["delta"].abs() > 0).all()  # every base of the span counts, between the elements too
    unscored = pd.read_csv(tmp_path / "variants.unscored.tsv", sep="\t")
    assert unscored["reason"].tolist() == ["outside_every_window"]
    for (chrom, position, alt), carried_rows in rows.groupby(["chrom", "pos", "alt"]):
        mutated = mutated_fasta(genome_path, tmp_path / "mutated.fa", chrom, position - 1, alt)
        (tmp_path / "mutated.fa.fai").unlink(missing_ok=True)
        predict_pairs(model_dir, mutated, tmp_path / "pairs.csv", tmp_path / "carrying.tsv")
        carried = pd.read_csv(tmp_path / "carrying.tsv", sep="\t").set_index("pair_id")["score"]
        assert (carried.loc[carried_rows["pair_id"]].to_numpy() - carried_rows["alt_score"].to_numpy()).max() < 1e-6
        assert (carried.loc[carried_rows["pair_id"]].to_numpy() - carried_rows["alt_score"].to_numpy()).min() > -1e-6


def test_span_models_are_explained_over_the_whole_span(long_run):
    """`snakemake explain` with span models: every span model's attributions over its best test pairs' spans,
    the segments' shares, and for the long demo's insulated pairs the insulator's enrichment."""
    from safetensors.numpy import load_file

    folder = long_run.parent
    planned = job_counts(snakemake(folder, "-n", "results/demo_long/linear_span/span_segments.tsv").stdout)
    assert planned.get("span_attributions") == 1 and "train" not in planned  # reads the finished model
    run_workflow(folder, "results/demo_long/linear_span/span_segments.tsv")
    model_dir = long_run / "demo_long" / "linear_span"
    segments = pd.read_csv(model_dir / "span_segments.tsv", sep="\t")
    predictions = pd.read_csv(model_dir / "predictions.tsv", sep="\t")
    assert len(segments) == min(40, len(predictions))  # explain.span_pairs, spread down the ranking
    assert (
        segments["score"].iloc[0] == predictions["score"].max()
        and segments["score"].iloc[-1] == predictions["score"].min()
    )
    assert segments["score"].is_monotonic_decreasing
    shares = segments[["enhancer_share", "between_share", "promoter_share"]].sum(axis=1)
    assert np.allclose(shares, 1.0)
    truth = pd.read_csv(folder / "resources/demo_long/demo_long.truth.tsv", sep="\t").set_index("pair_id")
    insulated = truth.loc[segments["pair_id"], "insulated"].astype(bool).to_numpy()
    assert segments.loc[insulated, "insulator_enrichment"].notna().all()
    assert segments.loc[~insulated, "insulator_enrichment"].isna().all()
    stored = load_file(str(model_dir / "span_attributions.safetensors"))
    assert stored["pair_id"].tolist() == segments["pair_id"].tolist()
    assert (np.diff(stored["offsets"]) == segments["span_length"]).all()
    from PIL import Image

    with Image.open(model_dir / "span_attributions.png") as image:  # one panel a pair, PNG only (as motifs.png)
        assert image.format == "PNG" and image.height >= 6 * 150
        assert (np.asarray(image.convert("L")) < 128).mean() > 0.002
    assert (model_dir / "attributions.bw").stat().st_size > 0


def test_the_long_demo_overlay_replicates_the_span_model_and_trains_the_rest_once(tmp_path):
    # As `make demo-long` runs it: linear_span's seed lottery (one seed in three to five misses the
    # insulator) is met by an ensemble of its replicates; its length control runs once (the overlay's own
    # entry, to keep the run within half an hour); softmax_span runs out of budget in any seed and has no control.
    for name in ("config", "data"):
        (tmp_path / name).symlink_to(REPO / name)
    overlay = REPO / "config" / "demo_long.yaml"
    run = snakemake(tmp_path, "-s", str(REPO / "Snakefile"), "--configfile", str(overlay), "-n")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    counts = job_counts(run.stdout + run.stderr)
    assert counts["train_replicate"] == 3 and counts["ensemble"] == 1 and counts["evaluate_replicated"] == 1
    assert "linear_span_length_control/model.safetensors" in run.stdout + run.stderr
    assert "linear_span_length_control/replicates" not in run.stdout + run.stderr
    assert "softmax_span_length_control" not in run.stdout + run.stderr
    assert counts["train"] == 4 and counts["evaluate"] == 4  # linear, softmax, the control, softmax_span
    assert "transfer" not in counts  # one cell line: its transfer matrix would be each model's test AUROC again
    # Softmax on spans trains first (train_first): its scoring, quadratic in each span, then runs beside the
    # other trainings; then the longest budgets, the length control first of those.
    priorities = dict(
        re.findall(
            r"rule train(?:_replicate)?:\n(?:\s+\w+: .*\n)*?\s+wildcards: cell=\w+, model=(\w+).*\n\s+priority: (\d+)",
            run.stdout,
        )
    )
    assert priorities == {
        "linear": "12",
        "softmax": "12",
        "linear_span": "12",
        "linear_span_length_control": "13",
        "softmax_span": "14",
    }
