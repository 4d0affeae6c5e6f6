"""A real tiny Snakemake run of the explain target: attributions, motifs, the bigWig and the report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from epiformer.constants import ELEMENTS
from epiformer.interpret.attribution_store import read_attributions
from epiformer.interpret.attributions import contributions
from epiformer.interpret.motif_discovery import COLUMNS
from epiformer.io.files import read_windows
from tests.helpers import (
    copy_workflow,
    job_counts,
    per_cell_and_pooled_config,
    report_results,
    require_bedtools,
    run_workflow,
    snakemake,
)


@pytest.fixture(scope="module")
def explain_run(tmp_path_factory):
    require_bedtools()
    config = per_cell_and_pooled_config()
    config["explain"] = {"top_pairs": 40, "ism_pairs": 4, "modisco": {"max_seqlets": 500, "leiden_runs": 2}}
    folder = copy_workflow(tmp_path_factory.mktemp("explain_workflow"), config)
    planned = snakemake(folder, "-n", "explain")
    assert planned.returncode == 0, planned.stderr[-3000:]
    run_workflow(folder, "explain")
    report = snakemake(folder, "--report", "results/report.html", "explain")
    assert report.returncode == 0, report.stderr[-3000:]
    return {"folder": folder, "planned": job_counts(planned.stdout)}


def test_explain_runs_for_each_cell_lines_own_element_models(explain_run):
    # demo_a and demo_b x linear; not the pooled model, whose windows are every cell line's.
    assert explain_run["planned"]["attributions"] == 2
    assert explain_run["planned"]["motifs"] == 2


@pytest.mark.parametrize("cell", ["demo_a", "demo_b"])
def test_the_motif_table_the_logos_and_the_agreement_are_written(explain_run, cell):
    results = explain_run["folder"] / "results" / cell / "linear"
    motifs = pd.read_csv(results / "motifs.tsv", sep="\t")
    assert list(motifs.columns) == COLUMNS
    assert motifs["rank"].tolist() == list(range(1, len(motifs) + 1))
    assert (results / "motifs.png").read_bytes().startswith(b"\x89PNG")
    agreement = json.loads((results / "attribution_agreement.json").read_text())
    assert agreement["method"] == "ism" and agreement["pairs"] == 40 and agreement["ism_pairs"] == 4
    assert set(agreement) >= {"integrated_gradients", "saliency"}


def test_the_explained_pairs_are_the_best_scored_test_pairs(explain_run):
    results = explain_run["folder"] / "results" / "demo_a"
    tensors = read_attributions(results / "linear" / "attributions.safetensors")
    predictions = pd.read_csv(results / "linear" / "predictions.tsv", sep="\t")
    best = predictions.sort_values(["score", "pair_id"], ascending=[False, True], kind="stable").head(40)
    assert tensors["pair_id"].tolist() == best["pair_id"].tolist()
    np.testing.assert_allclose(tensors["score"], best["score"], atol=1e-5)


def test_the_bigwig_holds_each_window_bases_contribution_at_its_genome_position(explain_run):
    import pyBigWig

    results = explain_run["folder"] / "results" / "demo_a"
    tensors = read_attributions(results / "linear" / "attributions.safetensors")
    windows = read_windows(results / "windows.tsv").set_index("pair_id").loc[tensors["pair_id"]]
    expected: dict[tuple[str, int], list[float]] = {}
    for element in ELEMENTS:
        per_base = contributions(tensors[f"{element}_hypothetical"].astype(np.float32), tensors[f"{element}_onehot"])
        for chrom, start, values in zip(windows[f"{element}_chrom"], windows[f"{element}_start"], per_base):
            for offset, value in enumerate(values):
                expected.setdefault((chrom, int(start) + offset), []).append(float(value))
    track = pyBigWig.open(str(results / "linear" / "attributions.bw"))
    fai = pd.read_csv(explain_run["folder"] / "resources/demo/genome.fa.fai", sep="\t", header=None)
    assert track.chroms() == dict(zip(fai[0], fai[1]))
    positions = list(expected)[:: max(1, len(expected) // 300)]
    for chrom, position in positions:
        assert track.values(chrom, position, position + 1)[0] == pytest.approx(
            np.mean(expected[(chrom, position)]), abs=1e-4
        )
    covered = sum(
        (track.stats(chrom, type="coverage", exact=True)[0] or 0) * size for chrom, size in track.chroms().items()
    )
    assert covered == pytest.approx(len(expected))


def test_the_report_shows_the_logos(explain_run):
    results = report_results((explain_run["folder"] / "results" / "report.html").read_text())
    logos = [path for path in results if path.endswith("motifs.png")]
    assert sorted(logos) == ["results/demo_a/linear/motifs.png", "results/demo_b/linear/motifs.png"]
