"""Files between stages: written so that a killed or failed job never leaves a half-written one.

Every output is written to a hidden temporary name in the same folder and renamed into
place; a rename within one filesystem is atomic. The windows table, which several stages
read, is read here, with no dependencies beyond pandas.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from epiformer.constants import ELEMENTS


def temporary_path(path: str | Path) -> Path:
    """A hidden name beside `path`, unique to this process, to write under before renaming into place."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write(temporary)` and rename the result to `path`; remove the temporary on failure."""
    path, temporary = Path(path), temporary_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    atomic_write(path, lambda temporary: temporary.write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode())


@contextmanager
def atomic_outputs(*paths: str | Path) -> Iterator[list[Path]]:
    """Temporary paths to write `paths` under, renamed into place together when the block ends without an error.

    For outputs written bit by bit (streamed) that must appear only once every check has
    passed: on an error no output appears, the temporaries are removed, and so are the
    folders this made for them (when still empty).
    """
    paths = [Path(path) for path in paths]
    made = sorted(
        {folder for path in paths for folder in (path.parent, *path.parent.parents) if not folder.exists()},
        key=lambda folder: len(folder.parts),
        reverse=True,
    )
    temporaries = [temporary_path(path) for path in paths]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    done = False
    try:
        yield temporaries
        for temporary, path in zip(temporaries, paths):
            os.replace(temporary, path)
        done = True
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
        for folder in made if not done else ():
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def sha256_file(path: str | Path) -> str:
    """The file's SHA-256, hex, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_windows(path: str | Path) -> pd.DataFrame:
    """A windows.tsv (`epiformer.data.windows`), chromosome names kept as text (`1` is not the number 1)."""
    return pd.read_csv(path, sep="\t", dtype={f"{element}_chrom": str for element in ELEMENTS})
