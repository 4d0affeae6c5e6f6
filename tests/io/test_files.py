"""epiformer.io.files: atomic writes, checksums and the windows.tsv reader."""

import hashlib
import os
import subprocess
import sys

import pandas as pd
import pytest

from epiformer.io.files import (
    atomic_outputs,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    read_windows,
    sha256_file,
    temporary_path,
)


def test_a_writer_that_raises_leaves_no_file_and_no_temporary(tmp_path):
    path = tmp_path / "out" / "metrics.json"

    def half_then_fail(temporary):
        temporary.write_text('{"auroc": 0.')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half_then_fail)
    assert list((tmp_path / "out").iterdir()) == []  # the folder was made; nothing is left in it


def test_a_failed_rewrite_keeps_the_old_file_whole(tmp_path):
    path = tmp_path / "summary.tsv"
    path.write_text("old\n")

    def fail(temporary):
        temporary.write_text("new, but only half")
        raise KeyboardInterrupt  # Ctrl-C, or the SIGINT Snakemake sends its jobs

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, fail)
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.tsv"]


KILLED_WRITE = """
import os, signal, sys
from epiformer.io.files import atomic_write
def write_then_die(temporary):
    temporary.write_text("new, but only half")
    os.kill(os.getpid(), signal.SIGKILL)  # killed before the rename: no finally runs
atomic_write(sys.argv[1], write_then_die)
"""


def test_a_killed_writer_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "predictions.tsv"
    path.write_text("old\n")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(path)], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert path.read_text() == "old\n"
    (left,) = [p for p in tmp_path.iterdir() if p != path]  # the half-written temporary, hidden, beside it
    assert left.name.startswith(".predictions.tsv.tmp-") and left.read_text() == "new, but only half"


def test_the_new_file_replaces_the_old_in_one_rename(tmp_path):
    path = tmp_path / "model.json"
    path.write_text("old")
    reader = open(path)  # a reader that opened the old file keeps reading it whole
    seen = {}

    def write(temporary):
        assert temporary == temporary_path(path) and temporary.parent == path.parent  # same folder: rename is atomic
        assert temporary.name.startswith(".") and str(os.getpid()) in temporary.name  # hidden, one per process
        temporary.write_text("new")
        seen["during"] = path.read_text()  # the old file stays in place until the rename

    atomic_write(path, write)
    assert seen["during"] == "old" and path.read_text() == "new"
    assert reader.read() == "old"
    reader.close()
    assert not temporary_path(path).exists()


def test_text_and_bytes_round_trip(tmp_path):
    atomic_write_text(tmp_path / "a" / "b.txt", "Δ AUROC\n")
    atomic_write_bytes(tmp_path / "c.bin", bytes(range(256)))
    assert (tmp_path / "a" / "b.txt").read_bytes() == "Δ AUROC\n".encode()
    assert (tmp_path / "c.bin").read_bytes() == bytes(range(256))


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, 3 * (1 << 20) + 17])  # around the 1 MiB block
def test_sha256_file_equals_hashlib(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "x").write_bytes(data)
    assert sha256_file(tmp_path / "x") == hashlib.sha256(data).hexdigest()


def test_read_windows_keeps_chromosome_names_as_text(tmp_path):
    path = tmp_path / "windows.tsv"
    path.write_text(
        "pair_id\tlabel\tsplit\tdistance\tenhancer_chrom\tenhancer_start\tenhancer_end\t"
        "promoter_chrom\tpromoter_start\tpromoter_end\n"
        "0\t1\ttrain\t500\t1\t100\t200\t1\t600\t700\n"
        "1\t0\ttest\t-1\t01\t100\t200\tX\t600\t700\n"
        "2\t0\tval\t900\t2\t5\t15\t2\t900\t920\n"
    )
    assert pd.read_csv(path, sep="\t")["enhancer_chrom"].tolist() == [1, 1, 2]  # what a plain read makes of them
    windows = read_windows(path)
    assert windows["enhancer_chrom"].tolist() == ["1", "01", "2"]
    assert windows["promoter_chrom"].tolist() == ["1", "X", "2"]
    assert windows["enhancer_start"].dtype == "int64" and windows["distance"].tolist() == [500, -1, 900]


def test_atomic_outputs_appear_together_or_not_at_all(tmp_path):
    out = tmp_path / "new" / "deeper"
    with pytest.raises(ValueError, match="bad line"):
        with atomic_outputs(out / "a.tsv", out / "b.tsv") as (a, b):
            a.write_text("rows")
            b.write_text("half")
            raise ValueError("bad line")
    assert not (tmp_path / "new").exists()  # the folders it made are gone as well
    with atomic_outputs(out / "a.tsv", out / "b.tsv") as (a, b):
        a.write_text("rows")
        b.write_text("unscored")
        assert not (out / "a.tsv").exists()
    assert (out / "a.tsv").read_text() == "rows" and (out / "b.tsv").read_text() == "unscored"
    assert sorted(path.name for path in out.iterdir()) == ["a.tsv", "b.tsv"]
