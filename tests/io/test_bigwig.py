"""Per-base bigWig tracks (epiformer.io.bigwig), read back with pyBigWig."""

from __future__ import annotations

import numpy as np
import pyBigWig
import pytest

from epiformer.io.bigwig import BigWigError, mean_per_base, write_bigwig

SIZES = {"chr1": 1000, "chr2": 300, "chrM": 50}


def test_a_signal_reads_back_base_by_base_with_the_header_chromosomes(tmp_path):
    rng = np.random.default_rng(0)
    starts = np.sort(rng.choice(1000, 120, replace=False))
    values = rng.normal(size=120).astype(np.float32)
    write_bigwig(tmp_path / "s.bw", SIZES, {"chr2": ([0, 1, 299], [0.5, -2.0, 3.25]), "chr1": (starts, values)})
    bigwig = pyBigWig.open(str(tmp_path / "s.bw"))
    assert bigwig.isBigWig() and bigwig.chroms() == SIZES  # every chromosome, signal or not
    intervals = bigwig.intervals("chr1")
    assert [start for start, _, _ in intervals] == starts.tolist() and all(e == s + 1 for s, e, _ in intervals)
    np.testing.assert_allclose([value for _, _, value in intervals], values, rtol=1e-6)
    assert bigwig.intervals("chr2") == ((0, 1, 0.5), (1, 2, -2.0), (299, 300, 3.25))
    assert bigwig.intervals("chrM") is None
    assert np.isnan(bigwig.values("chr2", 2, 3)[0])  # a base with no value is no data, not 0
    assert bigwig.header()["nBasesCovered"] == 123
    bigwig.close()


def test_mean_per_base_averages_overlapping_windows_like_a_loop():
    rng = np.random.default_rng(1)
    window_starts = [10, 14, 30, 12]
    window_values = [rng.normal(size=width) for width in (8, 8, 4, 1)]
    starts, means = mean_per_base(window_starts, window_values)
    expected = {}
    for start, values in zip(window_starts, window_values):
        for offset, value in enumerate(values):
            expected.setdefault(start + offset, []).append(value)
    assert starts.tolist() == sorted(expected) and starts.dtype == np.int64
    np.testing.assert_allclose(means, [np.mean(expected[position]) for position in sorted(expected)])
    two_d_starts, two_d_means = mean_per_base(np.array([0, 2]), np.ones((2, 4)))
    assert two_d_starts.tolist() == [0, 1, 2, 3, 4, 5] and (two_d_means == 1).all()


def test_averaged_windows_write_as_one_track(tmp_path):
    starts, means = mean_per_base([0, 5], [np.full(10, 2.0), np.full(10, 4.0)])
    write_bigwig(tmp_path / "a.bw", {"chr1": 100}, {"chr1": (starts, means)})
    bigwig = pyBigWig.open(str(tmp_path / "a.bw"))
    assert bigwig.values("chr1", 0, 15) == [2.0] * 5 + [3.0] * 5 + [4.0] * 5


@pytest.mark.parametrize(
    "signal, message",
    [
        ({"chr1": ([5, 3], [1.0, 1.0])}, r"chr1: start 3 at index 1 follows 5; .* first \(mean_per_base\)"),
        ({"chr1": ([3, 3], [1.0, 1.0])}, r"start 3 at index 1 follows 3"),
        ({"chr2": ([299, 300], [1.0, 1.0])}, r"chr2: position 300 is outside the chromosome \(0 to 299\)"),
        ({"chr1": ([-1], [1.0])}, r"position -1 is outside"),
        ({"chr1": ([1, 2], [1.0, np.nan])}, r"chr1: value nan at position 2; values must be finite"),
        ({"chr1": ([1, 2], [1.0])}, r"must be 1-D of one length"),
        ({"chr7": ([1], [1.0])}, r"chromosome 'chr7' has a signal but no size"),
    ],
)
def test_a_bad_signal_fails_naming_chromosome_and_position_and_writes_nothing(tmp_path, signal, message):
    with pytest.raises(BigWigError, match=message):
        write_bigwig(tmp_path / "s.bw", SIZES, signal)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_earlier_file(tmp_path, monkeypatch):
    write_bigwig(tmp_path / "s.bw", SIZES, {"chr1": ([1], [1.0])})
    before = (tmp_path / "s.bw").read_bytes()
    real_open = pyBigWig.open

    class FailsMidway:
        def __init__(self, path, mode):
            self.file = real_open(path, mode)

        def addHeader(self, *args, **kwargs):
            self.file.addHeader(*args, **kwargs)

        def addEntries(self, *args, **kwargs):
            raise RuntimeError("disk full")

        def close(self):
            self.file.close()

    monkeypatch.setattr(pyBigWig, "open", FailsMidway)
    with pytest.raises(RuntimeError, match="disk full"):
        write_bigwig(tmp_path / "s.bw", SIZES, {"chr1": ([2], [5.0])})
    assert (tmp_path / "s.bw").read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["s.bw"]
