"""Logging for workflow jobs: plain lines to the rule's `log:` file and to stderr, and progress."""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)


def progress(
    iterable: Iterable,
    total: int,
    description: str,
    *,
    every_percent: float = 10,
    every_seconds: float = 60,
    clock: Callable[[], float] = time.monotonic,
) -> Iterable:
    """`iterable` (of `total` items), showing how far it has got.

    On an interactive terminal, a tqdm bar. Otherwise (a SLURM job, a rule's `log:` file) an
    INFO line on the `epiformer` logger every `every_percent` percent of `total` or every
    `every_seconds` seconds, whichever comes first, with items done/total, the rate and the
    time left, and a last line with the total time when the iteration ends. An item counts as
    done when the loop asks for the next one, so the rate includes the loop's own work.
    Fewer than 2 items: the iterable as it is.
    """
    if total < 2:
        return iterable
    if sys.stderr.isatty():
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=description, leave=False)
    return _logged_progress(iterable, total, description or "progress", every_percent, every_seconds, clock)


def _logged_progress(
    iterable: Iterable, total: int, description: str, every_percent: float, every_seconds: float, clock
) -> Iterator:
    step = max(1, math.ceil(total * every_percent / 100))
    start = last_line = clock()
    done = 0
    for item in iterable:
        yield item
        done += 1
        now = clock()
        if done < total and (done % step == 0 or now - last_line >= every_seconds):
            rate = done / max(now - start, 1e-9)
            log.info(
                "%s: %d/%d (%d%%), %s, %s left",
                description,
                done,
                total,
                100 * done // total,
                format_rate(rate),
                format_duration((total - done) / rate),
            )
            last_line = now
    elapsed = clock() - start
    log.info(
        "%s: %d/%d done in %s (%s)",
        description,
        done,
        total,
        format_duration(elapsed),
        format_rate(done / max(elapsed, 1e-9)),
    )


def format_rate(per_second: float) -> str:
    """Items per second, or seconds per item when that is under one a second: `12.5/s`, `2.0 s each`."""
    if per_second <= 0:
        return "0/s"
    if per_second >= 100:
        return f"{per_second:,.0f}/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    return f"{1 / per_second:.1f} s each"


def format_duration(seconds: float) -> str:
    """`36s`, `15m40s`, `2h05m`."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def setup_logging(
    log_path: str | Path | None = None, level: int = logging.INFO, append: bool = False
) -> logging.Logger:
    """Lines to stderr and to `log_path` (overwritten, or appended to: a job's other processes)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        if not append:
            Path(log_path).write_text("")
        # Always appending: processes this one starts append to the same file, and a handle
        # opened for writing would later overwrite their lines from its own position.
        handlers.append(logging.FileHandler(log_path, mode="a"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers, force=True)
    return logging.getLogger("epiformer")


def log_files() -> list[str]:
    """The files this process logs to, for processes it starts to log to as well."""
    return [h.baseFilename for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
