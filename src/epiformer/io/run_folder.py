"""A run of one's own data in a folder of its own: `epiformer init`.

The workflow reads `config/config.yaml` and the sample sheet it names from the folder Snakemake
runs in, and writes resources/, results/ and logs/ there. A user's run therefore lives in a
folder of its own, not in the checkout, whose config and sample sheet run the built-in demo:
editing those mixes the demo's cell lines into the user's run. `init_run_folder` writes a
folder's config (samples, genomes, windows and the held-out chromosomes; every other key takes
its default) and sample sheet, and says how to run it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from epiformer.io.configfile import check_folder_names
from epiformer.io.files import atomic_write_text

CONFIG = Path("config/config.yaml")
SAMPLES = Path("config/samples.tsv")


class InitError(ValueError):
    """A bad argument of `epiformer init`: the message names it and the fix."""


def workflow_snakefile() -> str:
    """The Snakefile of the checkout this package runs from (an editable install, or EPIFORMER_SOURCE), or a
    placeholder to fill in."""
    for checkout in (os.environ.get("EPIFORMER_SOURCE"), Path(__file__).resolve().parents[3]):
        if checkout and (Path(checkout) / "Snakefile").is_file() and (Path(checkout) / "workflow").is_dir():
            return str(Path(checkout).resolve() / "Snakefile")
    return "/path/to/epiformer/Snakefile"


def init_run_folder(
    folder: str | Path,
    genome: tuple[str, str],
    pairs: dict[str, str],
    val_chromosomes: list[str] | None = None,
    test_chromosomes: list[str] | None = None,
) -> list[Path]:
    """Write `folder`/config/config.yaml and config/samples.tsv for `pairs` (cell line -> pairs file) on
    `genome` (name, FASTA); returns the files written. Paths are written absolute, so the folder can move."""
    folder = Path(folder)
    name, fasta = genome
    check_folder_names([name], "genome", "--genome")
    check_folder_names(pairs, "cell line", "--pairs")
    if not pairs:
        raise InitError("--pairs: give at least one cell line's pairs file, as CELL=PATH.")
    fasta = existing_file(fasta, "--genome", "a genome FASTA (plain or bgzip)")
    files = {cell: existing_file(path, f"--pairs {cell}", "a pairs file") for cell, path in pairs.items()}
    for written in (CONFIG, SAMPLES):
        if (folder / written).exists():
            raise InitError(
                f"{folder / written} exists already: init writes a new run's folder and overwrites nothing. "
                "Choose another folder, or edit that file."
            )
    atomic_write_text(folder / CONFIG, config_text(name, fasta, val_chromosomes or [], test_chromosomes or []))
    sheet = "cell_line\tpairs\tgenome\n" + "".join(f"{cell}\t{path}\t{name}\n" for cell, path in files.items())
    atomic_write_text(folder / SAMPLES, sheet)
    return [folder / CONFIG, folder / SAMPLES]


def existing_file(path: str, option: str, what: str) -> str:
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise InitError(f"{option}: {path} is not a file; give the path of {what}.")
    return str(resolved)


def config_text(genome: str, fasta: str, val: list[str], test: list[str]) -> str:
    """The folder's config: what a run of one's own must say; json.dumps quotes each value as YAML reads it."""
    snakefile = workflow_snakefile()
    split_note = "" if val and test else "  # name held-out chromosomes of your genome, e.g. [chr7] and [chr8]"
    return f"""\
# A run of your own data, written by `epiformer init`. Every key not set here takes its default,
# documented beside it in the checkout's config/config.yaml (config/README.md has worked examples).
# From this folder:
#   snakemake -s {snakefile} --cores all -n   (a dry run: checks the settings, lists the jobs)
#   snakemake -s {snakefile} --cores all
samples: {SAMPLES}
genomes:
  {genome}: {json.dumps(fasta)}
windows:
  enhancer_width: 3000   # bases read around each enhancer's centre (TargetFinder's enhancers are ~3 kb)
  promoter_width: 2000   # bases read around each promoter's centre
split:
  mode: chromosome       # whole chromosomes held out, so no test pair shares sequence with a training pair
  val_chromosomes: {json.dumps(val)}{split_note}
  test_chromosomes: {json.dumps(test)}
"""
