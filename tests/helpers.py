"""Plain helpers and constants the test modules share; fixtures live in conftest.py.

Test modules import from here only (never from one another, nor from conftest.py), so each
reads on its own and a helper has one definition.
"""

from __future__ import annotations

import ast
import base64
import json
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from numpy.lib.stride_tricks import sliding_window_view

from epiformer.constants import ELEMENTS
from epiformer.data.encode import encode_shards
from epiformer.data.genome import Genome
from epiformer.data.pairs import ELEMENT_COLUMNS, read_pairs
from epiformer.data.splits import SplitSpec, assign_splits
from epiformer.data.windows import WindowSpec, make_windows
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar
from epiformer.synthetic.demo import DemoSpec
from epiformer.synthetic.demo_long import LongDemoSpec

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TINY_DEMO = DemoSpec(n_chromosomes=3, chromosome_length=200_000, positives_per_cell=60)
TINY_LONG_DEMO = LongDemoSpec(pairs=90, n_chromosomes=3, max_distance=20_000)  # every split holds positives
TINY_MODEL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, "patch_size": 4, "kernel_size": 8, "dropout": 0.0}
# What a copy of the workflow needs beside config/: the rules and what they run, and the
# docs/ table the scaling-reference rule reads.
WORKFLOW_FILES = ("Snakefile", "workflow", "scripts", "envs", "docs/scaling_cpu.tsv")


def require_bedtools() -> None:
    if shutil.which("bedtools") is None:
        pytest.fail("bedtools is not installed: run `sudo apt-get install -y bedtools` (make test does it as root)")


def tiny_config() -> dict:
    """config/config.yaml shrunk to run end to end in about a minute on two cores."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["demo"].update(n_chromosomes=3, chromosome_length=200_000, positives_per_cell=60)
    config["windows"].update(enhancer_width=64, promoter_width=48)
    config["split"].update(val_chromosomes=["chr2"], test_chromosomes=["chr3"])
    config["models"] = {name: {"attention": name, **TINY_MODEL} for name in ("linear", "softmax")}
    config["train"].update(epochs=1, batch_size=16)
    config["evaluate"]["bootstrap"] = 20
    return config


def per_cell_and_pooled_config() -> dict:
    """tiny_config with one per-cell and one pooled M7, and only the distance baseline (scoring rules skip pooled)."""
    config = tiny_config()
    config["models"] = {
        "linear": {"attention": "linear", **TINY_MODEL},
        "linear_pooled": {"attention": "linear", **TINY_MODEL, "pooled": True},
    }
    config["baselines"]["names"] = ["distance"]
    return config


def write_config(folder: Path, config: dict) -> Path:
    """A user's config/ in `folder`: `config` as config.yaml beside the checkout's sample sheet."""
    (folder / "config").mkdir(parents=True, exist_ok=True)
    (folder / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    shutil.copy(REPO / "config" / "samples.tsv", folder / "config" / "samples.tsv")
    return folder


def copy_workflow(folder: Path, config: dict) -> Path:
    """A self-contained copy of the workflow in `folder` (WORKFLOW_FILES), configured by `config`."""
    for name in WORKFLOW_FILES:
        source, target = REPO / name, folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    return write_config(folder, config)


def snakemake(folder: Path, *args: str, cores: int = 2, timeout: int = 600) -> subprocess.CompletedProcess:
    """`snakemake --cores N ARGS` run in `folder` by the interpreter running the tests, so with the same epiformer."""
    return subprocess.run(
        [*SNAKEMAKE, "--cores", str(cores), *args], cwd=folder, capture_output=True, text=True, timeout=timeout
    )


def run_workflow(folder: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`snakemake(folder, *args)` that must succeed; a failure shows the end of Snakemake's log."""
    run = snakemake(folder, *args, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return run


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Rule -> number of jobs, from the `Job stats:` table of a dry run."""
    table = dry_run_output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.MULTILINE)}


def report_results(html: str) -> dict:
    """The Snakemake report's embedded table of results: path -> {caption, data_uri, labels, ...}."""
    start = html.index("var results = ", html.index('<script id="results">')) + len("var results = ")
    return json.JSONDecoder().raw_decode(html, start)[0]


def report_file(entry: dict) -> str:
    """The text of a file embedded in the report (its base64 data URI)."""
    return base64.b64decode(entry["data_uri"].split(";base64,", 1)[1]).decode()


def report_description(html: str) -> str:
    """The report's landing-page text (workflow/report/workflow.rst rendered), tags removed."""
    start = html.index("var workflow_desc = ") + len("var workflow_desc = ")
    return re.sub("<[^>]+>", "", json.JSONDecoder().raw_decode(html, start)[0])


def windows_frame(rows, split: str = "train") -> pd.DataFrame:
    """A windows.tsv table of (enhancer chrom, start, end, promoter chrom, start, end) rows; labels alternate."""
    frame = pd.DataFrame(rows, columns=ELEMENT_COLUMNS)
    frame.insert(0, "pair_id", range(len(frame)))
    frame.insert(1, "label", [i % 2 for i in range(len(frame))])
    frame.insert(2, "split", split)
    centres = {e: (frame[f"{e}_start"] + frame[f"{e}_end"]) // 2 for e in ELEMENTS}
    frame.insert(3, "distance", (centres["enhancer"] - centres["promoter"]).abs())  # as windows.tsv has it
    return frame


def clean_bases(sequence: str) -> str:
    """A sequence as the package reads it: upper case, every base other than ACGT an N."""
    return "".join(base if base in "ACGT" else "N" for base in sequence.upper())


def bedtools_getfasta(fasta: Path, intervals, folder: Path) -> list[str]:
    """`bedtools getfasta` of (chrom, start, end) intervals, 0-based half-open, as clean_bases."""
    bed = folder / "getfasta.bed"
    bed.write_text("".join(f"{chrom}\t{start}\t{end}\n" for chrom, start, end in intervals))
    out = subprocess.run(
        ["bedtools", "getfasta", "-fi", str(fasta), "-bed", str(bed), "-tab"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [clean_bases(line.split("\t")[1]) for line in out.splitlines()]


def windows_and_shards(demo: dict, cell: str, split: SplitSpec, out: Path, widths=(64, 48), flank: int = 4) -> Path:
    """windows.tsv and shards/ of one demo cell line under `out`, the way the windows and encode rules make them."""
    genome = Genome(demo["genome"])
    windows, _ = make_windows(read_pairs(demo[cell]), genome.sizes, WindowSpec(*widths), genome)
    windows = assign_splits(windows, split)
    out.mkdir(parents=True, exist_ok=True)
    windows.to_csv(out / "windows.tsv", sep="\t", index=False)
    encode_shards(
        windows,
        demo["genome"],
        out / "shards",
        flank=flank,
        shard_size=64,
        windows_stats={"split": {"mode": split.mode, "leak_prone": split.leak_prone}},
    )
    return out


def tensor_shapes_during(run: Callable[[], object]) -> list[tuple[str, tuple[int, ...]]]:
    """(operator, shape) of every tensor that a PyTorch operator takes or returns while `run()` runs.

    Recorded below autograd (a `TorchDispatchMode`), so the backward pass's operators and
    the tensors autograd saves for it are seen too, whatever Python code called them.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class RecordShapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for value in tree_flatten((args, kwargs, out))[0]:
                if isinstance(value, torch.Tensor):
                    self.shapes.append((str(func), tuple(value.shape)))
            return out

    with RecordShapes() as recorder:
        run()
    return recorder.shapes


def quadratic_tensors(shapes, length: int) -> list[tuple[str, tuple[int, ...]]]:
    """The entries of `shapes` that could hold a length x length matrix: two dimensions >= length,
    or at least length ** 2 elements."""
    return [
        (op, shape) for op, shape in shapes if sum(d >= length for d in shape) >= 2 or math.prod(shape) >= length**2
    ]


def shared_difficulty(n: int = 400, seed: int = 0):
    """Labels, a baseline's scores and a model's: the model adds a little signal to what the baseline sees."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(int)
    baseline = rng.normal(0, 1, n) + labels
    model = baseline + 0.4 * labels + rng.normal(0, 0.1, n)
    return labels, model, baseline


def independent_paired_interval(labels, scores_a, scores_b, metric, resamples, seed, promoters=None):
    """The paired percentile interval of `metric(a) - metric(b)`, recomputed apart from epiformer.evaluation.metrics:
    one seeded draw per resample, both scored on it; ((lo, hi), resamples that held both classes).

    Without `promoters`, a draw is N rows; with them ([N] promoter names), as many promoters as there are (in
    order of first appearance) and all the rows of each.
    """
    rng = np.random.default_rng(seed)
    if promoters is None:
        draws = [rng.integers(0, len(labels), len(labels)) for _ in range(resamples)]
    else:
        names = list(dict.fromkeys(promoters))
        rows_of = [np.flatnonzero(np.asarray(promoters) == name) for name in names]
        draws = [
            np.concatenate([rows_of[index] for index in rng.integers(0, len(names), len(names))])
            for _ in range(resamples)
        ]
    kept = [rows for rows in draws if 0 < labels[rows].sum() < len(rows)]
    differences = [metric(labels[rows], scores_a[rows]) - metric(labels[rows], scores_b[rows]) for rows in kept]
    return np.percentile(differences, [2.5, 97.5]), len(kept)


def pairs_frame(rows) -> pd.DataFrame:
    """A pairs table as read_pairs returns it; rows are (enhancer chrom, start, end, promoter ..., label)."""
    frame = pd.DataFrame(rows, columns=[*ELEMENT_COLUMNS, "label"])
    frame.insert(0, "pair_id", range(len(frame)))
    frame.attrs.update(path="pairs.csv", header_lines=1)
    return frame


def assert_figure(png: Path, min_width: int = 300, min_height: int = 200) -> None:
    """A figure as the plots write it: a PNG of a plausible size with something drawn on it, and its SVG beside."""
    from PIL import Image

    with Image.open(png) as image:
        assert image.format == "PNG", png
        assert image.width >= min_width and image.height >= min_height, (png, image.size)
        pixels = np.asarray(image.convert("L"))
    assert (pixels < 128).mean() > 0.002, f"{png} is (almost) blank"  # axes, text and lines are dark
    assert len(np.unique(pixels)) > 8, f"{png} has too few shades to be a drawn figure"
    assert "<svg" in png.with_suffix(".svg").read_text()[:2000], png.with_suffix(".svg")


def flip_a_byte(path: Path) -> None:
    """Corrupt a file in place: one bit of its middle byte flipped."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


KILLED_ENCODE = """
import os, signal, sys
import pandas as pd
import {module} as writer
real_write = writer.write_shard
written = []
def write_then_die(path, tensors):
    digest = real_write(path, tensors)
    written.append(path)
    if len(written) == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # a real kill, half-way through the shards
    return digest
writer.write_shard = write_then_die
windows = pd.read_csv(sys.argv[1], sep="\\t")
writer.{function}(windows, sys.argv[2], sys.argv[3], flank=3, shard_size={shard_size})
"""


def encode_killed_after_two_shards(
    module: str, function: str, windows: pd.DataFrame, source: Path, target: Path, shard_size: int
) -> subprocess.CompletedProcess:
    """Run `module.function` (a shard writer reading `source`) in a process that SIGKILLs itself after two shards."""
    windows_path = target.parent / f"{target.name}.windows.tsv"
    windows.to_csv(windows_path, sep="\t", index=False)
    script = KILLED_ENCODE.format(module=module, function=function, shard_size=shard_size)
    return subprocess.run(
        [sys.executable, "-c", script, str(windows_path), str(source), str(target)], capture_output=True, text=True
    )


def store_of(fasta: Path) -> Path:
    """The genome store of a test FASTA, built beside it on first use (`{stem}.store/`)."""
    from epiformer.data.encode_genome import build_store

    folder = Path(fasta).with_name(f"{Path(fasta).stem}.store")
    if not (folder / "manifest.json").exists():
        build_store(fasta, folder)
    return folder


def encode_spans_of_fasta(windows: pd.DataFrame, fasta: Path, outdir: Path, **kwargs) -> dict:
    """Span shards of `windows`, cut from the genome store of `fasta` (built on first use); the manifest."""
    from epiformer.data.spans import encode_span_shards

    return encode_span_shards(windows, store_of(fasta), outdir, **kwargs)


def read_fasta(path) -> dict[str, str]:
    """A FASTA file's sequences by name, as written (case kept), read apart from the package."""
    sequences, name = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith(">"):
            name = line[1:].split()[0]
            sequences[name] = []
        else:
            sequences[name].append(line)
    return {name: "".join(parts) for name, parts in sequences.items()}


def write_fasta(path, sequences: dict[str, str]):
    """Write `sequences` as FASTA, 70 bases a line; returns the path."""
    with open(path, "w") as handle:
        for name, sequence in sequences.items():
            handle.write(f">{name}\n" + "".join(sequence[i : i + 70] + "\n" for i in range(0, len(sequence), 70)))
    return path


def epiformer_predict(
    model_dir: Path, genome: Path, pairs: Path, out: Path
) -> tuple[subprocess.CompletedProcess, pd.DataFrame]:
    """`epiformer predict` as a user runs it, which must succeed; the run (for its log) and the scores it wrote."""
    command = [sys.executable, "-m", "epiformer.cli", "predict", "--model", model_dir, "--genome", genome]
    run = subprocess.run(
        [*map(str, command), "--pairs", str(pairs), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run, pd.read_csv(out, sep="\t")


def ctcf_scores(sequence: bytes) -> np.ndarray:
    """Both strands' CTCF log2-odds at each start, computed here apart from epiformer.synthetic."""
    probabilities = read_jaspar(bundled_jaspar_path())["CTCF"].probabilities
    log_odds = np.log2(probabilities / 0.25)
    codes = np.array(["ACGTN".index(c) for c in sequence.decode()])
    windows = sliding_window_view(codes, len(log_odds))
    padded = np.c_[log_odds, np.full(len(log_odds), -1e3)]
    forward = padded[np.arange(len(log_odds)), windows].sum(axis=1)
    complement = np.c_[log_odds[::-1, ::-1], np.full(len(log_odds), -1e3)]  # reverse, A<->T and C<->G
    return np.maximum(forward, complement[np.arange(len(log_odds)), windows].sum(axis=1))


def ctcf_site_starts(sequence: bytes, bits: tuple[float, ...], chunk: int = 1_000_000) -> list[np.ndarray]:
    """For each threshold in `bits`, the starts of CTCF sites scoring at least it (`ctcf_scores`), chunk by chunk."""
    width = len(read_jaspar(bundled_jaspar_path())["CTCF"].probabilities)
    hits = [[] for _ in bits]
    for offset in range(0, max(len(sequence) - width + 1, 0), chunk):
        scores = ctcf_scores(sequence[offset : offset + chunk + width - 1])
        for found, threshold in zip(hits, bits):
            found.append(offset + np.flatnonzero(scores >= threshold))
    return [np.concatenate(found) if found else np.zeros(0, int) for found in hits]


def under_open_file_limit(limit: int = 1024):
    """preexec_fn of a subprocess: the soft open-file limit most Linux machines start with."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def browser() -> str | None:
    """A Chromium to load pages headless, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def open_in_browser(page: Path, *args: str) -> str:
    """Load `page` in headless Chromium (JavaScript run, 15 s of virtual time) with `args` (e.g. --dump-dom,
    --screenshot=PATH); returns what it printed. No sandbox: the tests may run as root, and the page is ours."""
    command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000", *args]
    done = subprocess.run([*command, page.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def visible_text(dom: str) -> str:
    """The text a reader sees in a dumped DOM: scripts, styles and tags left out, spaces collapsed."""
    dom = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def modules_spelling(file_name: str, owner: Path) -> list[str]:
    """`path:line` of every place in the package (src/), the rule scripts (scripts/) or the benchmarks, outside
    `owner`, whose code spells `file_name` as a string or a path's last part (docstrings and comments may): what
    a file format's one owner keeps at zero."""
    spelled, folders = [], ("src", "scripts", "benchmarks")
    name = re.compile(rf"(^|/){re.escape(file_name)}$")  # the name alone, or a path's (an f-string's last part)
    for path in sorted(file for folder in folders for file in (REPO / folder).rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree) if _has_docstring(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or path == owner:
                continue
            if name.search(node.value.strip()) and id(node) not in docstrings:
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return spelled


def _has_docstring(node) -> bool:
    body = getattr(node, "body", None)
    if not isinstance(body, list) or not body:
        return False
    return isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
