"""Logging for workflow jobs: plain lines to the rule's `log:` file and to stderr."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def progress(iterable, total: int, description: str):
    """A progress bar on an interactive terminal; plain iteration when output goes to a log."""
    if total < 2 or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=description, leave=False)


def setup_logging(log_path: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers, force=True)
    return logging.getLogger("epiformer")
