"""Where each model of `make demo-long` (or `make demo-scale`) loses AUROC: the insulator, or the partner grammar?

The long demo's label needs two things (docs/demo_long.md): whether the two elements are
partners of the grammar (an exclusive-or of the enhancer's and the promoter's motif: GATA1
pairs with SP1 and YY1, SPI1 with ELK1), and whether an insulator lies between them. The
generator's truth table says, for every test pair, which class it is and whether it is
insulated, so each model's test scores can be split by what they must tell apart:

- insulation: among partner pairs, open against insulated (a model of the element windows
  sits at 0.5 here; the span model must see the insulator);
- grammar: among open pairs with both elements active, partners against hard negatives;
- activity: among open pairs, both elements active against both inactive.

Then two what-ifs on the same scores: the AUROC if insulated partner pairs were all ranked
last (a perfect insulator), and if hard negatives were (a perfect grammar). The oracle's
row shows what the what-ifs themselves cost it (they rank 0.05-probability pairs last). Usage, after
`make demo-long`:
    python benchmarks/studies/long_demo_breakdown.py [--run runs/demo-long] [--out breakdown.tsv]
    python benchmarks/studies/long_demo_breakdown.py --run runs/demo-scale --cell demo_scale  # same classes, borders
(docs/results/demo_long.md's and demo_scale.md's breakdown tables are written from such TSVs.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from long_demo_run import CELL, RUN, results_dir, truth_path
from sklearn.metrics import roc_auc_score


def auroc(positive: pd.Series, score: pd.Series) -> float:
    return roc_auc_score(positive, score) if positive.nunique() == 2 else float("nan")


def ranked_last(scores: pd.Series, where: pd.Series) -> pd.Series:
    """The scores with the pairs `where` moved below every other pair, their order kept."""
    return scores.where(~where, scores - (scores.max() - scores.min() + 1))


def breakdown(pairs: pd.DataFrame) -> dict[str, float]:
    """pairs: `label`, `score` and the truth's `pair_class`, `insulated`, `p_interact`."""
    partners, open_pairs = pairs[pairs.pair_class == "partners"], pairs[pairs.insulated == 0]
    active = open_pairs[open_pairs.pair_class != "easy"]
    blocked = (pairs.pair_class == "partners") & (pairs.insulated == 1)
    return {
        "AUROC": auroc(pairs.label, pairs.score),
        "insulation": auroc(partners.insulated == 0, partners.score),
        "grammar": auroc(active.pair_class == "partners", active.score),
        "activity": auroc(open_pairs.pair_class != "easy", open_pairs.score),
        "if insulator perfect": auroc(pairs.label, ranked_last(pairs.score, blocked)),
        "if grammar perfect": auroc(pairs.label, ranked_last(pairs.score, pairs.pair_class == "hard")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=RUN, help="where make demo-long ran")
    parser.add_argument("--cell", default=CELL, help=f"the demo's cell line (default {CELL}; demo_scale)")
    parser.add_argument("--out", type=Path, help="also write the table here (TSV, one row per model)")
    args = parser.parse_args()
    truth_file = truth_path(args.run, args.cell)
    model_dirs = sorted(path.parent for path in results_dir(args.run, args.cell).glob("*/predictions.tsv"))
    if not truth_file.exists() or not model_dirs:
        raise SystemExit(f"{args.run}: no {args.cell} truth or predictions; run its demo first (or give --run).")
    truth = pd.read_csv(truth_file, sep="\t")
    rows = {}
    for model_dir in model_dirs:
        scores = pd.read_csv(model_dir / "predictions.tsv", sep="\t")
        predictions = scores.merge(truth.drop(columns="label"), on="pair_id")
        rows[model_dir.name] = breakdown(predictions)
    # Every model scores the same test pairs, so the oracle's row is the truth's p on the last model's.
    rows["oracle"] = breakdown(predictions.assign(score=predictions.p_interact))
    table = pd.DataFrame(rows).T
    print(f"test pairs: {len(predictions)}; AUROC within the pairs each column compares (docstring)")
    print(table.to_string(float_format=lambda value: f"{value:.3f}" if np.isfinite(value) else "-"))
    if args.out:
        table.rename_axis("model").to_csv(args.out, sep="\t", float_format="%.6g")


if __name__ == "__main__":
    main()
