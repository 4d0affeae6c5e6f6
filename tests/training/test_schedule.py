"""The order trainings start in when cores are short (training.schedule)."""

import math

import yaml

from epiformer.model.configs import with_length_controls
from epiformer.training.schedule import ENCODING_PRIORITY, TRAINING_PRIORITY, token_budget, training_priorities
from tests.helpers import REPO


def test_the_largest_budget_goes_first_and_its_length_control_before_it():
    models = {
        "small": {"input": "span", "max_tokens": 2_000_000},
        "big": {"input": "span"},
        "big_length_control": {"input": "span", "between": "shuffled"},
        "elements": {},
    }
    priorities = training_priorities(models, {"max_tokens": 27_400_000})
    assert priorities["big_length_control"] > priorities["big"] == priorities["elements"] > priorities["small"]
    assert min(priorities.values()) == TRAINING_PRIORITY  # every training above the other jobs' default 0


def test_no_budget_counts_as_the_longest_and_train_first_goes_before_everything():
    models = {"epochs_only": {"max_tokens": None}, "budgeted": {"max_tokens": 10}, "first": {"max_tokens": 1}}
    assert token_budget(models["epochs_only"], {}) == math.inf
    models["first"]["train_first"] = True
    priorities = training_priorities(models, {})
    assert priorities["first"] > priorities["epochs_only"] > priorities["budgeted"]


def test_the_scale_demo_starts_the_control_and_leaves_softmax_span_for_last():
    # Two cores, the control ~32 min, each replicate ~27, softmax_span ~16: the control and a replicate
    # first, then the other replicate beside softmax_span (54 min), not softmax_span first (59).
    config = yaml.safe_load((REPO / "config" / "demo_scale.yaml").read_text())
    models = with_length_controls(config["models"])
    priorities = training_priorities(models, config["train"])
    ordered = sorted(("linear_span", "linear_span_length_control", "softmax_span"), key=priorities.get)
    assert ordered == ["softmax_span", "linear_span", "linear_span_length_control"]


def test_encoding_goes_before_every_training():
    config = yaml.safe_load((REPO / "config" / "demo_scale.yaml").read_text())
    priorities = training_priorities(with_length_controls(config["models"]), config["train"])
    assert ENCODING_PRIORITY > max(priorities.values())
    rules = (REPO / "workflow" / "rules" / "encode.smk").read_text()
    assert rules.count("priority: ENCODING_PRIORITY") == 2  # element-window shards and span shards
