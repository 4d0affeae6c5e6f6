"""A model's test predictions on ENCODE-rE2G's CRISPR benchmark, as its authors' pipeline reads them.

EngreitzLab/CRISPR_comparison scores a predictor from a table with one row per element-gene
prediction, `chr start end name class TargetGene TargetGeneTSS CellType` then the score
columns (its "generic" and "ENCODE" formats), and a `pred_config.txt` naming each score
column (`pred_id pred_col boolean alpha aggregate_function fill_value inverse_predictor
pred_name_long color`). It overlaps the predicted elements with the tested ones, matches
genes by symbol, and computes AUPRC and precision at 70% recall.

`export_crispr_comparison` writes both for a model's (or a baseline's) folder of a run whose
cell line's pairs file is the benchmark: every test pair of `predictions.tsv`, the element's
own coordinates and gene (`measuredGeneSymbol`) from the pairs file, the TSS where the run
placed it (the run's `windows.tss_annotation`, read back from `windows_stats.json`), the
table's `CellType`, and the score as `Score`. Written beside predictions.tsv:
`crispr_comparison.tsv.gz` and `crispr_comparison.pred_config.txt`.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pandas as pd

from epiformer.constants import SCORE_FORMAT
from epiformer.data.pairs import CRISPR_BENCHMARK_GENE, PairsError, read_pairs
from epiformer.io.files import atomic_write_bytes, atomic_write_text
from epiformer.io.windows_stats import read_windows_stats, windows_stats_path
from epiformer.scoring.tracks import read_scores

log = logging.getLogger(__name__)

PREDICTION_COLUMNS = ["chr", "start", "end", "name", "class", "TargetGene", "TargetGeneTSS", "CellType", "Score"]
PRED_CONFIG_COLUMNS = [
    "pred_id",
    "pred_col",
    "boolean",
    "alpha",
    "aggregate_function",
    "fill_value",
    "inverse_predictor",
    "pred_name_long",
    "color",
]
TABLE_NAME, CONFIG_NAME = "crispr_comparison.tsv.gz", "crispr_comparison.pred_config.txt"


class ExportError(ValueError):
    """A model folder that cannot be exported, named with the fix."""


def crispr_comparison_table(pairs: pd.DataFrame, predictions: pd.DataFrame, cell_line: str) -> pd.DataFrame:
    """The prediction table (module docstring) of `predictions` (pair_id, score), from `read_pairs`' `pairs`."""
    if CRISPR_BENCHMARK_GENE not in pairs.columns:
        raise ExportError(
            f"{pairs.attrs.get('path', 'the pairs file')}: no `{CRISPR_BENCHMARK_GENE}` column; CRISPR_comparison "
            "matches predictions to genes by symbol, so only the CRISPR benchmark's tables can be exported."
        )
    scored = pairs.set_index("pair_id").reindex(predictions["pair_id"])
    missing = scored["enhancer_chrom"].isna().to_numpy()
    if missing.any():
        raise ExportError(
            f"predictions.tsv: pair_id {int(predictions['pair_id'].to_numpy()[missing][0])} is not in "
            f"{pairs.attrs.get('path')} ({int(missing.sum())} in all): the run read another pairs file."
        )
    start, end = scored["enhancer_start"].astype(int), scored["enhancer_end"].astype(int)
    cell_type = scored["CellType"] if "CellType" in scored.columns else pd.Series(cell_line, index=scored.index)
    return pd.DataFrame(
        {
            "chr": scored["enhancer_chrom"].to_numpy(),
            "start": start.to_numpy(),
            "end": end.to_numpy(),
            "name": (scored["enhancer_chrom"] + ":" + start.astype(str) + "-" + end.astype(str)).to_numpy(),
            "class": "NA",  # the element's class (genic, intergenic, promoter) is not the model's to say
            "TargetGene": scored[CRISPR_BENCHMARK_GENE].to_numpy(),
            "TargetGeneTSS": scored["promoter_start"].astype(int).to_numpy(),
            "CellType": cell_type.to_numpy(),
            "Score": predictions["score"].to_numpy(),
        }
    )[PREDICTION_COLUMNS]


def pred_config(pred_id: str, description: str) -> pd.DataFrame:
    """One predictor's pred_config row: a score (not boolean) where higher ranks first, the largest score of the
    predictions overlapping a tested element taken, 0 where none does; alpha left for the pipeline (NA)."""
    row = [pred_id, "Score", "FALSE", "NA", "max", "0", "FALSE", description, "NA"]
    return pd.DataFrame([row], columns=PRED_CONFIG_COLUMNS)


def export_crispr_comparison(model_dir: str | Path) -> dict:
    """Write the prediction table and pred_config of `model_dir` (results/{cell}/{model}/; module docstring)."""
    model_dir = Path(model_dir)
    predictions_path, stats_path = model_dir / "predictions.tsv", windows_stats_path(model_dir.parent)
    for path, what in ((predictions_path, "the model's test predictions"), (stats_path, "the cell line's windows")):
        if not path.is_file():
            raise ExportError(f"{path} not found ({what}): give the results/{{cell}}/{{model}}/ folder of a run.")
    stats = read_windows_stats(stats_path)
    pairs_path, annotation = stats["inputs"]["pairs"], stats["windows"].get("tss_annotation", "")
    try:
        pairs = read_pairs(pairs_path, require_label=False, tss_annotation=annotation)
    except PairsError as error:
        raise ExportError(f"{error} (the pairs file {stats_path} names; run from the run's folder)") from None
    predictions = read_scores(predictions_path)
    cell_line, model = model_dir.parent.name, model_dir.name
    table = crispr_comparison_table(pairs, predictions, cell_line)
    text = table.to_csv(sep="\t", index=False, float_format=SCORE_FORMAT)
    atomic_write_bytes(model_dir / TABLE_NAME, gzip.compress(text.encode(), mtime=0))
    config = pred_config(f"epiformer_{model}", f"epiformer {model} ({cell_line})")
    atomic_write_text(model_dir / CONFIG_NAME, config.to_csv(sep="\t", index=False))
    log.info("%d predictions of %s -> %s, %s", len(table), model_dir, TABLE_NAME, CONFIG_NAME)
    return {"predictions": len(table), "table": model_dir / TABLE_NAME, "pred_config": model_dir / CONFIG_NAME}
