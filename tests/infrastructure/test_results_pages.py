"""The published results (docs/results/) are what the saved run files say, table for table."""

from __future__ import annotations

import importlib.util
import re

import pandas as pd
import pytest

from tests.helpers import REPO

PAGES = REPO / "docs" / "results"
BLOCK = re.compile(r"<!-- generated:(\w+) -->\n(.*?)<!-- end generated:\1 -->", re.S)


def load_writer():
    spec = importlib.util.spec_from_file_location("write_tables", PAGES / "write_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATED = [page.stem for page in sorted(PAGES.glob("*.md")) if BLOCK.search(page.read_text())]


def test_some_page_publishes_generated_tables():
    assert "demo" in GENERATED


@pytest.mark.parametrize("page", GENERATED)
def test_every_generated_table_equals_what_the_saved_run_files_give(page):
    writer = load_writer()
    run = PAGES / "runs" / page
    assert (run / "summary.tsv").is_file(), f"docs/results/runs/{page}/summary.tsv is missing"
    for name, published in BLOCK.findall((PAGES / f"{page}.md").read_text()):
        assert published.strip() == writer.render(name, run).strip(), f"{page}.md table {name} is stale"


def test_the_auroc_table_reads_the_summary_and_bolds_linear_models_at_the_better_baseline(tmp_path):
    writer = load_writer()
    rows = [
        ("c1", "linear", "linear", 0.70, 100, 30),
        ("c1", "softmax", "softmax", 0.80, 100, 30),
        ("c1", "distance", None, 0.69, 100, 30),
        ("c1", "kmer", None, 0.65, 100, 30),
        ("c2", "linear", "linear", 0.60, 50, 10),
        ("c2", "softmax", "softmax", 0.55, 50, 10),
        ("c2", "distance", None, 0.50, 50, 10),
        ("c2", "kmer", None, 0.61, 50, 10),
    ]
    summary = pd.DataFrame(rows, columns=["cell_line", "model", "attention", "auroc", "n_test", "positives"])
    table = writer.auroc_table(summary).splitlines()
    assert table[0] == "| cell line (test pairs, positives) | linear | softmax | distance | k-mer |"
    assert table[2] == "| c1 (100, 30) | **0.700** | 0.800 | 0.690 | 0.650 |"  # softmax is never bold
    assert table[3] == "| c2 (50, 10) | 0.600 | 0.550 | 0.500 | 0.610 |"  # below k-mer: not bold
