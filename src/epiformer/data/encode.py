"""One-hot encoding of windows into bit-packed safetensors shards.

Stored layout (the one place it is defined; `epiformer.data.shards` reads it back):
`results/{cell}/shards/{split}/shard-NNNNN.safetensors` with at most `shard_size` pairs:

- `enhancer`, `promoter`: uint8 [N, L/2], each window's one-hot packed as
  `epiformer.sequence.onehot` defines it (4 bits a base). L = window width + 2 * flank; the
  flank bases on each side let training shift windows without re-reading the genome; bases
  past a chromosome end are N. Sequence is the reference + strand.
- `label`: uint8 [N]; `pair_id`: int64 [N]; `distance`: int64 [N], bp between the two
  window centres as in windows.tsv (-1 for a pair across chromosomes), for models that
  are given the pair's genomic distance.

`manifest.json` lists format version, the window spec once (`windows`: widths, edge, N
filter, trans pairs, from the windows stats), the flank, channel order, packing, every
shard with its row and label counts and SHA-256, and the checksums of the inputs. Every
file is written to a temporary name and renamed, so a killed job leaves nothing that looks
done.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors.numpy import save_file

from epiformer import __version__
from epiformer.constants import ALPHABET, ELEMENTS, SHARD_FORMAT
from epiformer.data.genome import Genome
from epiformer.data.shards import MANIFEST, write_manifest
from epiformer.io.files import atomic_write, sha256_file
from epiformer.io.runlog import progress
from epiformer.sequence.onehot import pack_codes


def encode_element(genome: Genome, chroms, starts, ends, flank: int) -> np.ndarray:
    """uint8 [N, (W + 2 * flank) / 2]: the packed one-hot of each window plus its flanks."""
    codes = genome.fetch_many(list(chroms), np.asarray(starts) - flank, np.asarray(ends) + flank)
    return pack_codes(codes)


def encode_windows(genome: Genome, windows: pd.DataFrame, flank: int) -> dict[str, np.ndarray]:
    """`enhancer` and `promoter`, uint8 [N, L/2], of the rows of a windows table (see windows.tsv)."""
    return {
        e: encode_element(genome, windows[f"{e}_chrom"], windows[f"{e}_start"], windows[f"{e}_end"], flank)
        for e in ELEMENTS
    }


def write_shard(path: Path, tensors: dict[str, np.ndarray]) -> str:
    """Write one shard atomically; returns its SHA-256."""
    digests = []

    def write(temporary: Path) -> None:
        save_file(tensors, str(temporary))
        digests.append(sha256_file(temporary))

    atomic_write(path, write)
    return digests[0]


@dataclass
class ShardJob:
    """One shard to write: its path in the shard folder, its split and its rows of windows.tsv."""

    relative: str  # path under the shard folder, e.g. "train/shard-00000.safetensors"
    split: str
    windows: pd.DataFrame


def plan_shards(windows: pd.DataFrame, shard_size: int) -> list[ShardJob]:
    """Consecutive chunks of at most `shard_size` pairs per split, in windows.tsv order."""
    jobs = []
    for split, frame in windows.groupby("split", sort=False):
        for number, offset in enumerate(range(0, len(frame), shard_size)):
            jobs.append(
                ShardJob(f"{split}/shard-{number:05d}.safetensors", split, frame.iloc[offset : offset + shard_size])
            )
    return jobs


def encode_one_shard(genome: Genome, job: ShardJob, outdir: Path, flank: int) -> dict:
    """Encode and write one shard; returns its manifest entry."""
    tensors = encode_windows(genome, job.windows, flank)
    tensors["label"] = job.windows["label"].to_numpy(dtype=np.uint8)
    tensors["pair_id"] = job.windows["pair_id"].to_numpy(dtype=np.int64)
    tensors["distance"] = job.windows["distance"].to_numpy(dtype=np.int64)
    digest = write_shard(outdir / job.relative, tensors)
    return {
        "path": job.relative,
        "split": job.split,
        "rows": len(job.windows),
        "positives": int(tensors["label"].sum()),
        "sha256": digest,
    }


_worker_source = None


def _open_worker_source(open_source, path: str) -> None:
    global _worker_source
    _worker_source = open_source(path)  # one handle per worker process, never shared


def _encode_in_worker(encode_one, job: ShardJob, outdir: Path, flank: int) -> dict:
    return encode_one(_worker_source, job, outdir, flank)


def run_shard_jobs(encode_one, open_source, source_path, jobs: list[ShardJob], outdir: Path, flank: int, workers: int):
    """Run `encode_one(source, job, outdir, flank)` per job, `source = open_source(source_path)`; manifest entries.

    The source is what sequence is cut from (a `Genome`, a `GenomeStore`). With `workers` > 1
    the jobs run in that many processes, each opening its own source; `encode_one` and
    `open_source` must be module-level (they are pickled to the workers). Entries come back in job order.
    """
    if workers > 1:
        initargs = (open_source, str(source_path))
        with ProcessPoolExecutor(workers, initializer=_open_worker_source, initargs=initargs) as pool:
            mapped = pool.map(_encode_in_worker, repeat(encode_one), jobs, repeat(outdir), repeat(flank))
            return list(progress(mapped, len(jobs), "shards"))
    with open_source(str(source_path)) as source:
        return [encode_one(source, job, outdir, flank) for job in progress(jobs, len(jobs), "shards")]


def clear_previous_run(outdir: Path) -> None:
    """Remove the manifest first, then shards and temporaries a killed run may have left."""
    (outdir / MANIFEST).unlink(missing_ok=True)
    for path in list(outdir.glob("*/shard-*.safetensors")) + list(outdir.glob("**/.*.tmp-*")):
        path.unlink()


def write_shard_folder(
    encode_shard, windows, open_source, source_path, outdir, flank: int, shard_size: int, workers: int
):
    """Clear what an interrupted run left in `outdir`, then write every split's shards with `encode_shard`.

    Returns the shards' manifest entries; the caller writes the manifest, last.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    clear_previous_run(outdir)
    jobs = plan_shards(windows, shard_size)
    for split in {job.split for job in jobs}:
        (outdir / split).mkdir(exist_ok=True)
    return run_shard_jobs(encode_shard, open_source, source_path, jobs, outdir, flank, workers)


def split_record(windows_stats: dict | None) -> dict:
    """The manifest's `split`: the windows stats' split mode and whether it is leak-prone."""
    split = (windows_stats or {}).get("split", {})
    return {"mode": split.get("mode", "chromosome"), "leak_prone": bool(split.get("leak_prone", False))}


def window_spec_of(windows: pd.DataFrame, spec: dict | None) -> dict:
    """The windows' WindowSpec (as the windows stats records it), checked against the table's widths.

    Without a report (a windows table made in Python), the spec is the widths alone.
    """
    spec = dict(spec or {})
    for element in ELEMENTS:
        widths = (windows[f"{element}_end"] - windows[f"{element}_start"]).unique()
        if len(widths) != 1 or spec.get(f"{element}_width", widths[0]) != widths[0]:
            raise ValueError(
                f"The {element} windows are {sorted(int(w) for w in widths)} bp wide, but the windows stats "
                f"says {spec.get(f'{element}_width')}: every window of an element has the spec's one width. "
                "Re-run the windows stage."
            )
        spec[f"{element}_width"] = int(widths[0])
    return spec


def encode_shards(
    windows: pd.DataFrame,
    genome_path: str | Path,
    outdir: str | Path,
    flank: int,
    shard_size: int,
    pairs_sha256: str = "",
    windows_stats: dict | None = None,
    workers: int = 1,
) -> dict:
    """Write every split's shards and `manifest.json` under `outdir`; returns the manifest.

    The manifest is written last, so a folder without one is never mistaken for finished;
    a re-run first clears what an interrupted run left. `workers` processes encode shards
    in parallel, each with its own genome handle; the bytes do not depend on `workers`.
    `windows_stats` is the windows stats (or any dict with `split`: `mode` and `leak_prone`);
    its split mode and window settings (`windows`) travel in the manifest to the model and metrics.
    """
    outdir = Path(outdir)
    entries = write_shard_folder(encode_one_shard, windows, Genome, genome_path, outdir, flank, shard_size, workers)
    with Genome(genome_path) as genome:
        genome_sha256 = genome.index_sha256()
    spec = window_spec_of(windows, (windows_stats or {}).get("windows"))
    manifest = {
        "format_version": SHARD_FORMAT,
        "epiformer_version": __version__,
        "channels": ALPHABET,
        "packing": "numpy.packbits(onehot[N, L, 4].reshape(N, -1), axis=1, bitorder='big') -> uint8 [N, L/2]",
        "windows": spec,  # the WindowSpec: widths, edge, N filter, trans pairs; model.json copies it
        "flank": flank,  # bases stored beyond each window, the most training may shift it
        "split": split_record(windows_stats),
        "shards": entries,
        "inputs": {"pairs_sha256": pairs_sha256, "genome_index_sha256": genome_sha256},
    }
    return write_manifest(outdir, manifest)
