"""The CRISPRi benchmark overlay (config/crispri.yaml) run the way a user with GRCh38 runs it, on a genome
with GRCh38's chromosome names and sizes whose sequence is synthetic: random bases around the pairs' elements
and TSSs, N elsewhere (no GRCh38 sequence is available here). A dry run of the whole overlay, the error
without a genome, and a short real run of a subset of the K562 pairs up to metrics.json."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from epiformer.data.shards import load_split
from epiformer.sequence.onehot import one_hot, unpack
from epiformer.synthetic.fragment_genome import build_fragment_genome
from tests.helpers import REPO, TINY_MODEL, job_counts, read_fasta, require_bedtools, run_workflow, snakemake

OVERLAY = REPO / "config" / "crispri.yaml"
DATA = REPO / "data" / "crispri-k562"
BENCHMARK = DATA / "EPCrisprBenchmark_combined_data.training_K562.GRCh38.tsv.gz"
SIZES = DATA / "GRCh38.chrom.sizes"
SPLIT = yaml.safe_load(OVERLAY.read_text())["split"]
# Pairs of the subset per (split, label), taken evenly down each group of the table: every split holds both
# classes, positives enriched from the benchmark's 1 in 22 so that 60 test pairs give an AUPRC worth asserting on.
SUBSET = {("train", 1): 50, ("train", 0): 140, ("val", 1): 15, ("val", 0): 35, ("test", 1): 20, ("test", 0): 40}
MISSING_TSS_ROWS = 2  # rows whose gene has no TSS in the benchmark (startTSS = endTSS = 0), kept in the subset
ACGT = np.frombuffer(b"ACGT", dtype=np.uint8)
CONTIG_FLANK = 3000  # random bases this far either side of each element centre and TSS: every window is known


def subset_pairs(split: str) -> int:
    return SUBSET[(split, 0)] + SUBSET[(split, 1)]


def split_of(chrom: str) -> str:
    return "test" if chrom in SPLIT["test_chromosomes"] else "val" if chrom in SPLIT["val_chromosomes"] else "train"


def benchmark_subset() -> pd.DataFrame:
    """Rows of the shipped K562 table, every column as written: SUBSET's pairs, then MISSING_TSS_ROWS."""
    table = pd.read_csv(BENCHMARK, sep="\t", dtype=str, keep_default_na=False)
    missing_tss = table["endTSS"] == "0"
    known = table[~missing_tss]
    groups = known.groupby([known["chrom"].map(split_of), known["Regulated"].eq("TRUE").astype(int)])
    picked = [rows.iloc[np.linspace(0, len(rows) - 1, SUBSET[key]).astype(int)] for key, rows in groups]
    return pd.concat([*picked, table[missing_tss].head(MISSING_TSS_ROWS)])


def write_synthetic_grch38(pairs: pd.DataFrame, fasta, seed: int = 0) -> None:
    """A bgzip GRCh38-shaped genome (names and sizes of GRCh38.chrom.sizes): random bases within CONTIG_FLANK of
    each element centre and TSS, merged where they overlap, N elsewhere."""
    element_centres = (pairs["chromStart"].astype(int) + pairs["chromEnd"].astype(int)) // 2
    centres = pd.concat(
        [
            pd.DataFrame({"chrom": pairs["chrom"], "at": element_centres}),
            pd.DataFrame({"chrom": pairs["chrTSS"], "at": pairs["startTSS"].astype(int)}),
        ]
    )
    rng, records = np.random.default_rng(seed), []
    for chrom, ats in centres.groupby("chrom")["at"]:
        merged = []
        for at in sorted(set(ats)):
            start, end = max(at - CONTIG_FLANK, 0), at + CONTIG_FLANK
            if merged and start <= merged[-1][1]:
                merged[-1][1] = end
            else:
                merged.append([start, end])
        for start, end in merged:
            bases = ACGT[rng.integers(0, 4, end - start)].tobytes().decode()
            records.append(f">{chrom}:{start + 1}-{end}\n{bases}\n")
    contigs = fasta.with_name("contigs.fa")
    contigs.write_text("".join(records))
    build_fragment_genome(contigs, SIZES, fasta)


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory):
    """A user's folder: the checkout's config/ and data/ (links), a subset of the K562 pairs with its sheet,
    and the synthetic GRCh38 genome, built once for the module (under a second of the 3.1-Gb genome's blocks)."""
    folder = tmp_path_factory.mktemp("crispri")
    for name in ("config", "data"):
        (folder / name).symlink_to(REPO / name)
    subset = benchmark_subset()
    subset.to_csv(folder / "K562.subset.tsv.gz", sep="\t", index=False)
    (folder / "subset.tsv").write_text(f"cell_line\tpairs\tgenome\nK562\t{folder / 'K562.subset.tsv.gz'}\tGRCh38\n")
    write_synthetic_grch38(subset, folder / "GRCh38.fa.gz")
    return folder


def written_bases(contigs: dict[str, str], chrom: str, start: int, end: int) -> str:
    """Bases [start, end) of `chrom` from the contigs write_synthetic_grch38 wrote (by name, `chrom:START-END`)."""
    for name, bases in contigs.items():
        contig_chrom, region = name.rsplit(":", 1)
        first = int(region.split("-")[0]) - 1  # 0-based start of the contig
        if contig_chrom == chrom and first <= start and end <= first + len(bases):
            return bases[start - first : end - first]
    raise AssertionError(f"{chrom}:{start}-{end} lies in no synthetic contig")


def genome_on_command_line(folder) -> list[str]:
    """The genome given as docs/results/crispri.md says: --config 'genomes={GRCh38: path}'."""
    return ["--config", f"genomes={{GRCh38: {folder / 'GRCh38.fa.gz'}}}"]


def test_the_overlay_without_a_genome_says_how_to_give_one(user_folder):
    run = snakemake(user_folder, "-s", str(REPO / "Snakefile"), "--configfile", str(OVERLAY), "-n")
    said = run.stdout + run.stderr
    assert run.returncode != 0
    assert "genomes: 'GRCh38' (cell line 'K562' in config/crispri.tsv) has no FASTA path" in said
    assert "--config 'genomes={GRCh38: /path/to/GRCh38.fa}'" in said


def test_the_overlay_plans_windows_encoding_every_model_and_the_baselines_for_k562(user_folder):
    run = snakemake(
        user_folder, "-s", str(REPO / "Snakefile"), "--configfile", str(OVERLAY), *genome_on_command_line(user_folder),
        "-n",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    overlay = yaml.safe_load(OVERLAY.read_text())
    models, baselines = overlay["models"], overlay["baselines"]["names"]
    counts = job_counts(run.stdout + run.stderr)
    assert counts["windows"] == counts["encode"] == 1 and "index_genome" not in counts  # the genome is indexed
    # Every model, and the span model's length control (length_control: true, the default)
    assert counts["train"] == counts["evaluate"] == len(models) + 1 and counts["baseline"] == len(baselines) == 3
    assert "results/K562/linear_span_length_control/metrics.json" in run.stdout + run.stderr
    assert counts["encode_spans"] == counts["genome_store"] == 1  # linear_span reads the whole span
    planned = run.stdout + run.stderr
    assert "results/K562/windows.tsv" in planned and "results/K562/distance/metrics.json" in planned
    assert {name for name, model in models.items() if model.get("input") == "span"} == {"linear_span"}


def test_a_short_run_on_a_synthetic_grch38_windows_splits_trains_and_scores_the_benchmark(user_folder):
    require_bedtools()
    short = {
        "samples": str(user_folder / "subset.tsv"),
        "models": {"linear": {**TINY_MODEL, "distance": False}, "linear_distance": {**TINY_MODEL, "distance": True}},
        "train": {"epochs": 1, "batch_size": 16, "threads": 1, "device": "cpu"},
        "evaluate": {"bootstrap": 20},
        # The table's startTSS, which the synthetic genome is written around (the overlay's annotation TSSs:
        # tests/data/test_crispr_benchmark.py).
        "windows": {"tss_annotation": ""},
    }
    (user_folder / "short.yaml").write_text(yaml.safe_dump(short))
    targets = [f"results/K562/{name}/metrics.json" for name in ("linear", "distance")]
    run_workflow(
        user_folder, "-s", str(REPO / "Snakefile"), *targets, "--configfile", str(OVERLAY),
        str(user_folder / "short.yaml"), *genome_on_command_line(user_folder),
    )  # fmt: skip
    results = user_folder / "results" / "K562"
    subset = pd.read_csv(user_folder / "K562.subset.tsv.gz", sep="\t").reset_index(drop=True)
    subset["pair_id"] = subset.index  # a pair's id is its data row in the file

    stats = json.loads((results / "windows_stats.json").read_text())
    kept = sum(SUBSET.values())
    assert stats["pairs_in"] == kept + MISSING_TSS_ROWS and stats["pairs_kept"] == kept
    assert stats["dropped"]["tss_missing"] == MISSING_TSS_ROWS  # counted, not lost
    others = {reason: count for reason, count in stats["dropped"].items() if reason != "tss_missing"}
    assert set(others.values()) == {0}, others  # the synthetic bases cover every window: none is mostly N
    assert stats["windows"]["max_span"] == 2_400_000
    for split in ("train", "val", "test"):
        assert stats["splits"][split] == {"pairs": subset_pairs(split), "positives": SUBSET[(split, 1)]}

    windows = pd.read_csv(results / "windows.tsv", sep="\t").merge(subset, on="pair_id", suffixes=("", "_file"))
    assert len(windows) == kept and (windows["label"] == windows["Regulated"].astype(int)).all()
    element_centre = (windows["chromStart"] + windows["chromEnd"]) // 2
    assert ((windows["enhancer_start"] + windows["enhancer_end"]) // 2 == element_centre).all()
    assert ((windows["promoter_start"] + windows["promoter_end"]) // 2 == windows["startTSS"]).all()  # on the TSS
    assert (windows["enhancer_end"] - windows["enhancer_start"] == 3000).all()
    assert (windows["promoter_end"] - windows["promoter_start"] == 2000).all()
    assert (windows["distance"] == (element_centre - windows["startTSS"]).abs()).all()
    for split, chromosomes in (("test", SPLIT["test_chromosomes"]), ("val", SPLIT["val_chromosomes"])):
        assert set(windows.loc[windows["split"] == split, "enhancer_chrom"]) <= set(chromosomes)
    held_out = set(SPLIT["test_chromosomes"]) | set(SPLIT["val_chromosomes"])
    assert not set(windows.loc[windows["split"] == "train", "enhancer_chrom"]) & held_out

    # Each window holds the bases written at its GRCh38 place (bgzip, so bedtools cannot read it back).
    contigs = read_fasta(user_folder / "contigs.fa")
    flank = yaml.safe_load(OVERLAY.read_text())["augment"]["max_shift"]
    shards = load_split(results / "shards", "test")
    encoded = windows.set_index("pair_id").loc[shards.pair_id]
    for element, length in shards.lengths.items():
        decoded = unpack(shards.packed(element, np.arange(len(shards))), length)[:, flank:-flank]
        intervals = encoded[[f"{element}_chrom", f"{element}_start", f"{element}_end"]].itertuples(index=False)
        sequences = [written_bases(contigs, *interval) for interval in intervals]
        np.testing.assert_array_equal(decoded, one_hot([sequence.encode() for sequence in sequences]))

    model = json.loads((results / "linear" / "metrics.json").read_text())
    distance = json.loads((results / "distance" / "metrics.json").read_text())
    assert model["split"]["mode"] == "chromosome" and model["n_test"] == distance["n_test"] == subset_pairs("test")
    assert 0 <= model["auprc"] <= 1 and 0 <= distance["auprc"] <= 1
    test_ids = set(windows.loc[windows["split"] == "test", "pair_id"])
    for name in ("linear", "distance"):
        assert set(pd.read_csv(results / name / "predictions.tsv", sep="\t")["pair_id"]) == test_ids
    prevalence = SUBSET[("test", 1)] / subset_pairs("test")
    assert distance["auprc"] > 1.5 * prevalence  # distance alone ranks the real labels well, as published
