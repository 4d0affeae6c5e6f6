"""Result tables as HTML pages for the report: the TSV's text, escaped, numbers right-aligned."""

from __future__ import annotations

import re

from epiformer.evaluation.html_table import is_numeric, read_table_text, write_table_html

TSV = (
    "cell_line\tmodel\tauroc\tn_test\tnote\texcludes_zero\n"
    "demo_a\tlinear\t0.9712\t120\t<b>&\tTrue\n"
    "demo_b\tkmer\t\t98\t\tFalse\n"
)


def test_page_holds_every_cell_as_written_and_right_aligns_numeric_columns(tmp_path):
    (tmp_path / "t.tsv").write_text(TSV)
    write_table_html(tmp_path / "t.tsv", tmp_path / "t.html", "Test <results>")
    page = (tmp_path / "t.html").read_text()
    assert "<h1>Test &lt;results&gt;</h1>" in page and f"{tmp_path / 't.tsv'} (tab-separated): 2 rows" in page
    header = re.search(r"<thead><tr>(.*)</tr></thead>", page).group(1)
    assert header == (
        '<th>cell_line</th><th>model</th><th class="number">auroc</th><th class="number">n_test</th>'
        "<th>note</th><th>excludes_zero</th>"
    )
    assert (
        '<tr><td>demo_a</td><td>linear</td><td class="number">0.9712</td><td class="number">120</td>'
        "<td>&lt;b&gt;&amp;</td><td>True</td></tr>"
    ) in page
    assert '<td class="number"></td>' in page  # an empty cell stays empty, not "nan"
    assert "<script" not in page and "href=" not in page and "<style>" in page  # self-contained


def test_a_column_is_numeric_when_every_filled_cell_is_a_number(tmp_path):
    (tmp_path / "t.tsv").write_text(TSV)
    table = read_table_text(tmp_path / "t.tsv")
    assert [is_numeric(table[column]) for column in table.columns] == [False, False, True, True, False, False]
    assert not is_numeric(table["note"].iloc[1:])  # only empty cells


def test_header_only_table_is_a_page_with_no_rows(tmp_path):
    (tmp_path / "t.tsv").write_text("split_a\tsplit_b\n")
    write_table_html(tmp_path / "t.tsv", tmp_path / "t.html", "Empty")
    page = (tmp_path / "t.html").read_text()
    assert "0 rows, 2 columns" in page and "<td" not in page


def test_the_summary_view_joins_each_metric_with_its_interval_to_three_decimals(tmp_path):
    header = "cell_line\tmodel\tkind\tinput\tbetween\tauroc\tauroc_lo\tauroc_hi\tauprc\tauprc_lo\tauprc_hi\tf1\tmcc"
    header += (
        "\tn_test\tpositives\treplicates\treplicate_auroc_mean\treplicate_auroc_sd\ttrain_seconds\tauroc_diff_kmer"
    )
    rows = [
        "c\tm7\ttransformer\tspan\tsequence\t0.87431\t0.8165\t0.9351\t0.6274\t0.5253\t0.7808\t0.784\t-0.000165"
        "\t250\t55\t2\t0.8702\t0.01497\t3031\t0.27",
        "c\tkmer\tbaseline\telements\t\t0.6\t0.494\t0.714\t0.257\t0.192\t0.361\t0.341\t0.059\t250\t55\t\t\t\t\t",
    ]
    (tmp_path / "summary.tsv").write_text("\n".join([header, *rows]) + "\n")
    write_table_html(tmp_path / "summary.tsv", tmp_path / "summary.html", "Summary", view="summary")
    page = (tmp_path / "summary.html").read_text()
    assert "<td>0.874 [0.817, 0.935]</td><td>0.627 [0.525, 0.781]</td>" in page
    assert "<td>0.870 ± 0.015 (2)</td>" in page and '<td class="number">-0.000</td>' in page  # MCC -0.000165
    assert "<td>0.600 [0.494, 0.714]</td>" in page and '<td class="number">3031</td>' in page
    assert "auroc_diff_kmer" not in page and "20 columns in" in page  # the rest stays in the TSV
