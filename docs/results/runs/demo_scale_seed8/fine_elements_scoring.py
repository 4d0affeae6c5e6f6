"""Score genome 8's replicate 2 (train seed 1) and its length control on the test chromosome, as the workflow's
evaluate rule would, when the run is stopped before its second pair of trainings."""
import json
from pathlib import Path
import numpy as np, pandas as pd
from epiformer.evaluation.evaluate import evaluate_model
from epiformer.evaluation.metrics import fast_roc_auc, paired_bootstrap_difference, groups_of_pairs
R = Path("/tmp/ds7/runs/demo-scale-seed8/results/demo_scale")
out = Path("/tmp/w/seed8"); out.mkdir(exist_ok=True)
scores = {}
for name, folder in [("replicate2", R / "linear_span/replicates/2"), ("control", R / "linear_span_length_control")]:
    m = evaluate_model(folder, R / "span_shards", out / f"{name}.tsv", out / f"{name}.json", resamples=1000, bootstrap_unit="promoter", windows=R / "windows.tsv")
    p = pd.read_csv(out / f"{name}.tsv", sep="\t").sort_values("pair_id")
    scores[name] = p
    print(name, json.dumps({k: m[k] for k in m if "auroc" in k}))
a, b = scores["replicate2"], scores["control"]
assert (a.pair_id.values == b.pair_id.values).all()
windows = pd.read_csv(R / "windows.tsv", sep="\t")
groups = groups_of_pairs(windows, a.pair_id.values, "promoter")
d = paired_bootstrap_difference(a.label.values, a.score.values, b.score.values, fast_roc_auc, 1000, 0, groups)
print("replicate2 - control", d)
truth = pd.read_csv("/tmp/ds7/runs/demo-scale-seed8/resources/demo_scale/demo_scale.truth.tsv", sep="\t")
print(truth.columns.tolist())
import sys
sys.path.insert(0, "benchmarks")
from long_demo_breakdown import breakdown
rows = {}
for name, p in scores.items():
    pred = p.merge(truth.drop(columns="label"), on="pair_id")
    rows[name] = breakdown(pred)
rows["oracle"] = breakdown(pred.assign(score=pred.p_interact))
print(pd.DataFrame(rows).T.round(3).to_string())
# Distance quintiles: each model and distance's AUROC within each
from epiformer.evaluation.metrics import fast_roc_auc as auc
w = windows.set_index("pair_id")
dist = w.loc[a.pair_id, "distance"].values if "distance" in w else None
print("has distance", dist is not None)
if dist is not None:
    q = pd.qcut(dist, 5, labels=False)
    for name, p in scores.items():
        print(name, [round(auc(p.label.values[q == i], p.score.values[q == i]), 3) for i in range(5)])
    base = pd.read_csv(R / "distance/predictions.tsv", sep="\t").set_index("pair_id").loc[a.pair_id, "score"].values
    print("distance", [round(auc(a.label.values[q == i], base[q == i]), 3) for i in range(5)])
    print("distance baseline AUROC", round(auc(a.label.values, base), 3))
