import filecmp

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from epiformer.data.genome import Genome
from epiformer.data.pairs import read_pairs
from epiformer.synthetic.demo import GRAMMARS, DemoSpec, generate_demo
from tests.helpers import TINY_DEMO


def test_same_seed_same_bytes_other_seed_other_genome(tiny_demo, tmp_path):
    again = generate_demo(tmp_path / "again", TINY_DEMO)
    for name, path in tiny_demo.items():
        assert filecmp.cmp(path, again[name], shallow=False), name
    other = generate_demo(tmp_path / "other", DemoSpec(**{**TINY_DEMO.__dict__, "seed": 99}))
    assert not filecmp.cmp(tiny_demo["genome"], other["genome"], shallow=False)


def test_genome_has_n_runs_soft_masking_and_varied_gc(full_demo):
    text = full_demo["genome"].read_text()
    sequence = "".join(line for line in text.splitlines() if not line.startswith(">"))
    assert 4_000_000 < len(sequence) < 6_500_000
    assert sequence.count("N") > 100_000 and sum(c.islower() for c in sequence[:500_000]) > 10_000
    genome = Genome(full_demo["genome"])
    gc = []
    for start in range(20_000, 700_000, 50_000):
        window = genome.fetch("chr1", start, start + 20_000).replace(b"N", b"")
        if window:
            gc.append((window.count(b"G") + window.count(b"C")) / len(window))
    assert max(gc) - min(gc) > 0.05


def test_both_formats_read_back_with_truth_aligned(full_demo):
    a, b = read_pairs(full_demo["demo_a"]), read_pairs(full_demo["demo_b"])
    assert a.attrs["format"] == "targetfinder" and b.attrs["format"] == "bedpe"
    for cell, pairs in (("demo_a", a), ("demo_b", b)):
        truth = pd.read_csv(full_demo[f"{cell}_truth"], sep="\t")
        assert truth["label"].tolist() == pairs["label"].tolist()
        assert 0.2 < pairs["label"].mean() < 0.3


def primary(column):
    return column.str.split(",").str[0]


@pytest.mark.parametrize("cell, grammar", [("demo_a", "erythroid"), ("demo_b", "lymphoid")])
def test_label_needs_both_elements_and_distance_carries_no_signal(full_demo, cell, grammar):
    pairs = read_pairs(full_demo[cell])
    truth = pd.read_csv(full_demo[f"{cell}_truth"], sep="\t")
    enhancer, promoter = primary(truth["enhancer_motifs"]), primary(truth["promoter_motifs"])
    partners = np.array([(e, p) in GRAMMARS[grammar] for e, p in zip(enhancer, promoter)])
    assert truth["label"][partners].mean() > 0.8 and truth["label"][~partners].mean() < 0.15
    # Knowing one element only: the best score is the positive rate of its motif.
    for side in (enhancer, promoter):
        one_sided = side.map(truth.groupby(side)["label"].mean())
        assert roc_auc_score(truth["label"], one_sided) < 0.8
    assert roc_auc_score(truth["label"], truth["p_interact"]) > 0.9
    centres = (pairs.enhancer_start + pairs.enhancer_end) // 2 - (pairs.promoter_start + pairs.promoter_end) // 2
    assert abs(roc_auc_score(pairs["label"], centres.abs()) - 0.5) < 0.05


@pytest.mark.parametrize("cell", ["demo_a", "demo_b"])
def test_additive_model_of_both_motifs_stays_well_below_the_oracle(full_demo, cell):
    """Best case for any model that scores each element on its own and adds (e.g. k-mer
    logistic regression): fitted on the true motif identities, in-sample, no interaction."""
    truth = pd.read_csv(full_demo[f"{cell}_truth"], sep="\t")
    motifs = pd.DataFrame(
        {"enhancer": primary(truth["enhancer_motifs"]), "promoter": primary(truth["promoter_motifs"])}
    )
    features = pd.get_dummies(motifs).to_numpy(float)
    additive = LogisticRegression(C=10, max_iter=2000).fit(features, truth["label"]).decision_function(features)
    assert roc_auc_score(truth["label"], additive) < 0.82
    assert roc_auc_score(truth["label"], truth["p_interact"]) > 0.9


def test_grammars_differ_between_cell_lines():
    assert GRAMMARS["erythroid"] != GRAMMARS["lymphoid"]
