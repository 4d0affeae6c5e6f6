"""metrics.json's one owner (epiformer.io.metrics_file)."""

import json

import pytest

from epiformer.io.metrics_file import MetricsFileError, metrics_path, read_metrics, write_metrics
from tests.helpers import REPO, modules_spelling

METRICS = {
    "auroc": 0.8,
    "auprc": 0.6,
    "auroc_ci95": [0.7, 0.9],
    "auprc_ci95": [0.5, 0.7],
    "n_test": 120,
    "positives": 30,
    "split": {"mode": "chromosome", "leak_prone": False},
}


def test_metrics_written_are_read_back_as_they_were(tmp_path):
    (tmp_path / "kmer").mkdir()
    write_metrics(metrics_path(tmp_path / "kmer"), METRICS)
    assert read_metrics(tmp_path / "kmer" / "metrics.json") == METRICS
    assert [path.name for path in (tmp_path / "kmer").iterdir()] == ["metrics.json"]  # no temporary left


@pytest.mark.parametrize(
    "text, why",
    [
        ("{", "JSONDecodeError"),
        (json.dumps({**METRICS, "auroc": None} | {"n_test": 1}).replace('"split"', '"x"'), "lacks split"),
    ],
)
def test_a_file_that_is_not_metrics_is_refused_naming_it_and_the_fix(tmp_path, text, why):
    (tmp_path / "metrics.json").write_text(text)
    with pytest.raises(MetricsFileError, match=rf"{tmp_path / 'metrics.json'}.*{why}.*re-run its evaluate"):
        read_metrics(tmp_path / "metrics.json")
    with pytest.raises(MetricsFileError, match="FileNotFoundError"):
        read_metrics(tmp_path / "absent.json")


def test_no_other_module_names_metrics_json():
    """Evaluation and the baselines write it, the summary and the figures read it, all through its owner."""
    assert modules_spelling("metrics.json", REPO / "src" / "epiformer" / "io" / "metrics_file.py") == []
