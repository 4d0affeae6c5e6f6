"""windows_stats.json, what the windows stage read, kept and dropped for one cell line: its one reader and writer.

The windows stage (`data.windows.run_windows`) writes it beside windows.tsv; encoding copies its split
record into the shards' manifest, the summary counts the pairs dropped, the CRISPRi export finds the
pairs file the run read. Its keys: docs/outputs.md. Torch-free and free of FASTA libraries, as the
summary's job is.
"""

from __future__ import annotations

import json
from pathlib import Path

from epiformer.io.files import atomic_write_text

WINDOWS_STATS = "windows_stats.json"


class WindowsStatsError(ValueError):
    """A windows_stats.json that is not one the windows stage wrote: the message names the file and the fix."""


def windows_stats_path(cell_dir: str | Path) -> Path:
    """A cell line's windows_stats.json, in its results folder (results/{cell}/)."""
    return Path(cell_dir) / WINDOWS_STATS


def read_windows_stats(path: str | Path) -> dict:
    """A windows_stats.json (`path`: the file), checked to be a JSON object (each reader takes the keys it needs)."""
    path = Path(path)
    try:
        stats = json.loads(path.read_text())
        if not isinstance(stats, dict):
            raise TypeError(f"a JSON {type(stats).__name__}, not an object")
    except (OSError, json.JSONDecodeError, TypeError) as error:
        raise WindowsStatsError(
            f"{path}: not the windows stage's record ({type(error).__name__}: {error}); re-run the cell line's "
            "windows job (snakemake --forcerun windows), or restore the file."
        ) from error
    return stats


def write_windows_stats(path: str | Path, stats: dict) -> None:
    """Write `stats` to `path` atomically (indented JSON)."""
    atomic_write_text(Path(path), json.dumps(stats, indent=2))
