"""windows_stats.json's one owner (epiformer.io.windows_stats)."""

import pytest

from epiformer.io.windows_stats import WindowsStatsError, read_windows_stats, windows_stats_path, write_windows_stats
from tests.helpers import REPO, modules_spelling

STATS = {"pairs_in": 240, "pairs_kept": 238, "dropped": {"span_longer_than_max_span": 2}}


def test_stats_written_are_read_back_as_they_were(tmp_path):
    write_windows_stats(windows_stats_path(tmp_path), STATS)
    assert read_windows_stats(tmp_path / "windows_stats.json") == STATS
    assert [path.name for path in tmp_path.iterdir()] == ["windows_stats.json"]  # no temporary left


@pytest.mark.parametrize("text, why", [("[1, 2]", "TypeError: a JSON list"), ("{", "JSONDecode")])
def test_a_file_that_is_not_the_windows_record_is_refused_naming_it_and_the_fix(tmp_path, text, why):
    windows_stats_path(tmp_path).write_text(text)
    with pytest.raises(WindowsStatsError, match=rf"{tmp_path / 'windows_stats.json'}: .*{why}.*forcerun windows"):
        read_windows_stats(windows_stats_path(tmp_path))


def test_no_other_module_names_windows_stats_json():
    """The windows stage writes it; encoding, the summary and the CRISPRi export read it, all through its owner."""
    assert modules_spelling("windows_stats.json", REPO / "src" / "epiformer" / "io" / "windows_stats.py") == []
