"""Progress without a terminal: plain log lines with done/total, rate and time left."""

from __future__ import annotations

import io
import logging
import sys

import pytest
from tqdm import tqdm

from epiformer.io.runlog import format_duration, format_rate, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def lines(caplog, monkeypatch):
    """The progress lines logged while stderr is not a terminal (as in a SLURM job's log)."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    caplog.set_level(logging.INFO, logger="epiformer")
    return lambda: [record.getMessage() for record in caplog.records if record.name == "epiformer.io.runlog"]


def run(items: int, seconds_each: float, **options) -> list[int]:
    """Iterate through progress() on a fake clock, each item taking `seconds_each`."""
    now = [1000.0]
    seen = []
    for item in progress(range(items), items, "epoch 2/5", clock=lambda: now[0], **options):
        now[0] += seconds_each
        seen.append(item)
    return seen


def test_a_line_every_tenth_then_a_last_line_with_the_total_time(lines):
    assert run(20, 2.0) == list(range(20))
    assert lines() == [
        *(f"epoch 2/5: {done}/20 ({done * 5}%), 2.0 s each, {(20 - done) * 2}s left" for done in range(2, 20, 2)),
        "epoch 2/5: 20/20 done in 40s (2.0 s each)",
    ]


def test_a_line_every_minute_when_a_tenth_takes_longer(lines):
    run(1000, 1.0)
    assert lines()[:4] == [
        "epoch 2/5: 60/1000 (6%), 1.0/s, 15m40s left",  # a minute, before the first tenth
        "epoch 2/5: 100/1000 (10%), 1.0/s, 15m00s left",
        "epoch 2/5: 160/1000 (16%), 1.0/s, 14m00s left",  # a minute after the last line
        "epoch 2/5: 200/1000 (20%), 1.0/s, 13m20s left",
    ]
    assert lines()[-2:] == ["epoch 2/5: 960/1000 (96%), 1.0/s, 40s left", "epoch 2/5: 1000/1000 done in 16m40s (1.0/s)"]
    assert len(lines()) == 9 + 10 + 1  # nine tenths, a minute after each tenth and at the start, the last line


def test_the_step_and_interval_can_be_set(lines):
    run(6, 0.01, every_percent=50, every_seconds=3600)
    assert lines() == ["epoch 2/5: 3/6 (50%), 100/s, 0s left", "epoch 2/5: 6/6 done in 0s (100/s)"]


def test_an_interrupted_loop_logs_no_last_line(lines):
    for item in progress(range(10), 10, "shards", clock=lambda: 0.0):
        if item == 3:
            break
    assert not any("done in" in line for line in lines())


def test_a_terminal_gets_a_bar_and_no_lines(caplog, monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    caplog.set_level(logging.INFO, logger="epiformer")
    bar = progress(range(5), 5, "shards")
    assert isinstance(bar, tqdm) and list(bar) == list(range(5))
    assert not caplog.records


def test_fewer_than_two_items_are_iterated_as_they_are(lines):
    items = [7]
    assert progress(items, 1, "shards") is items and not lines()


def test_rates_and_durations_read_plainly():
    assert [format_rate(r) for r in (0, 0.25, 3.14159, 12345.6)] == ["0/s", "4.0 s each", "3.1/s", "12,346/s"]
    assert [format_duration(s) for s in (0.4, 59, 61, 3599.6, 7512)] == ["0s", "59s", "1m01s", "1h00m", "2h05m"]
