"""epiformer crispr-export: a run's CRISPRi benchmark predictions in EngreitzLab/CRISPR_comparison's format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from epiformer.cli import main
from tests.helpers import REPO

DATA = REPO / "data" / "crispri-k562"
K562 = DATA / "EPCrisprBenchmark_combined_data.training_K562.GRCh38.tsv.gz"
ANNOTATION = DATA / "CollapsedGeneBounds.hg38.TSS500bp.bed.gz"
# The columns CRISPR_comparison's loader reads (workflow/scripts/crisprComparisonLoadInputData.R): a predictions
# table's first eight, then score columns; pred_config.txt's nine.
LOADER_COLUMNS = ["chr", "start", "end", "name", "class", "TargetGene", "TargetGeneTSS", "CellType"]
PRED_CONFIG = "pred_id pred_col boolean alpha aggregate_function fill_value inverse_predictor pred_name_long color"


def finished_run(folder, annotation: str):
    """results/K562/linear/ as a run leaves it: 300 of the table's pairs scored (of those with a TSS in the table,
    which either route keeps), and the windows' record."""
    cell = folder / "results" / "K562"
    (cell / "linear").mkdir(parents=True)
    rng = np.random.default_rng(0)
    with_tss = np.flatnonzero(pd.read_csv(K562, sep="\t")["startTSS"].to_numpy() > 0)
    ids = np.sort(rng.choice(with_tss, 300, replace=False))
    pd.DataFrame({"pair_id": ids, "label": 0, "score": rng.random(300)}).to_csv(
        cell / "linear" / "predictions.tsv", sep="\t", index=False
    )
    stats = {"inputs": {"pairs": str(K562)}, "windows": {"tss_annotation": annotation}}
    (cell / "windows_stats.json").write_text(json.dumps(stats))
    return cell / "linear"


def test_the_export_has_the_loaders_columns_each_pairs_element_gene_and_tss_and_the_score(tmp_path):
    model_dir = finished_run(tmp_path, str(ANNOTATION))
    assert main(["crispr-export", str(model_dir)]) == 0
    table = pd.read_csv(model_dir / "crispr_comparison.tsv.gz", sep="\t")
    assert list(table.columns) == LOADER_COLUMNS + ["Score"]
    predictions = pd.read_csv(model_dir / "predictions.tsv", sep="\t")
    benchmark = pd.read_csv(K562, sep="\t").iloc[predictions["pair_id"]].reset_index(drop=True)
    elements = benchmark[["chrom", "chromStart", "chromEnd"]].to_numpy()
    assert (table[["chr", "start", "end"]].to_numpy() == elements).all()
    assert (table["TargetGene"] == benchmark["measuredGeneSymbol"]).all() and (table["CellType"] == "K562").all()
    assert table["name"].tolist() == [f"{c}:{s}-{e}" for c, s, e in zip(table["chr"], table["start"], table["end"])]
    np.testing.assert_array_equal(table["Score"], predictions["score"])
    # The TSS where the run placed it: the benchmark annotation's, so distance is the table's distanceToTSS.
    centre = (table["start"] + table["end"]) // 2
    assert ((centre - table["TargetGeneTSS"]).abs() - benchmark["distanceToTSS"]).abs().max() <= 1
    config = (model_dir / "crispr_comparison.pred_config.txt").read_text().splitlines()
    assert config[0].split("\t") == PRED_CONFIG.split() and config[1].split("\t")[:2] == ["epiformer_linear", "Score"]


def test_a_run_on_the_tables_own_tss_exports_them_and_a_folder_without_predictions_is_an_error(tmp_path, capfd):
    model_dir = finished_run(tmp_path, "")
    assert main(["crispr-export", str(model_dir)]) == 0
    table = pd.read_csv(model_dir / "crispr_comparison.tsv.gz", sep="\t")
    ids = pd.read_csv(model_dir / "predictions.tsv", sep="\t")["pair_id"]
    assert (table["TargetGeneTSS"].to_numpy() == pd.read_csv(K562, sep="\t").iloc[ids]["startTSS"].to_numpy()).all()
    (model_dir / "predictions.tsv").unlink()
    assert main(["crispr-export", str(model_dir)]) == 1
    assert "predictions.tsv not found" in capfd.readouterr().err
