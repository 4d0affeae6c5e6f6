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
