"""benchmarks/studies/long_demo_breakdown.py: where a model loses AUROC on the long demo (its published tables
in docs/results/demo_long.md and demo_scale.md come from it), on pairs whose answer is known by construction."""

import sys

import numpy as np
import pandas as pd
import pytest

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "studies"))  # the studies import their helper as `long_demo_run`
from long_demo_breakdown import breakdown  # noqa: E402

COLUMNS = ("AUROC", "insulation", "grammar", "activity", "if insulator perfect", "if grammar perfect")


def demo_pairs(copies: int = 5) -> pd.DataFrame:
    """Every (class, insulated) combination, `copies` times; a pair interacts when it is of partners and open."""
    rows = [(kind, insulated) for kind in ("partners", "hard", "easy") for insulated in (0, 1)] * copies
    pairs = pd.DataFrame(rows, columns=["pair_class", "insulated"])
    pairs["label"] = ((pairs.pair_class == "partners") & (pairs.insulated == 0)).astype(int)
    pairs["p_interact"] = np.where(pairs.label == 1, 0.9, 0.05)
    return pairs


def test_a_model_that_reads_everything_scores_one_everywhere():
    pairs = demo_pairs()
    knows_all = 2 * pairs.label + (pairs.pair_class != "easy")  # interacting first, then active, then inactive
    found = breakdown(pairs.assign(score=knows_all))
    assert list(found) == [*COLUMNS] and all(value == 1.0 for value in found.values())


def test_a_model_blind_to_the_insulator_is_at_chance_on_insulation_and_perfect_if_the_insulator_were():
    pairs = demo_pairs()
    grammar_only = pairs.assign(score=2.0 * (pairs.pair_class == "partners") + (pairs.pair_class != "easy"))
    found = breakdown(grammar_only)
    assert found["insulation"] == 0.5 and found["grammar"] == 1.0 and found["activity"] == 1.0
    assert found["if insulator perfect"] == 1.0 and found["if grammar perfect"] < 1.0
    # By hand: 5 positives over 25 negatives, of which the 5 insulated partner pairs tie with the positives.
    assert found["AUROC"] == pytest.approx((5 * 20 + 0.5 * 5 * 5) / (5 * 25))


def test_a_model_of_activity_alone_misses_the_grammar():
    pairs = demo_pairs()
    active = pairs.assign(score=(pairs.pair_class != "easy").astype(float))
    found = breakdown(active)
    assert found["grammar"] == 0.5 and found["activity"] == 1.0 and found["insulation"] == 0.5
    assert found["if grammar perfect"] > found["AUROC"]
