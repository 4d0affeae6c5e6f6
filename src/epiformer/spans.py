"""Span input: one sequence per pair, from the first element window to the second, in ragged shards.

Not yet used by the workflow (it comes with `windows.input: span`); the fixed-width window
shards of `epiformer.encode` are unchanged.

Span coordinates (`span_coordinates`), 0-based, half-open, on the + strand. The two element
windows of a pair (windows.tsv, both on one chromosome) are taken in genome order: the first
element is the one whose window starts first (ties: the one that ends first, then the
enhancer). The span runs from the first window's start to the furthest window end, and
everything between is included. Every base of the span belongs to exactly one segment, cut
at two offsets within the span, `first_end` <= `second_start`:

- `[0, first_end)`: the first element; `[first_end, second_start)`: between (may be empty);
  `[second_start, length)`: the second element.
- Apart: `first_end` is where the first window ends and `second_start` where the second
  starts. Touching windows (second starts where the first ends): the between segment is empty.
- Overlapping windows: no between segment; the overlap `[s, e)` (the second window's start to
  the nearer window end) is cut at `m = (s + e) // 2`, so the first element keeps the first
  floor(n/2) of its n bases and the second the rest (`first_end == second_start == m`). When
  one window contains the other the second segment runs on to the span's end.

The span's `distance` is its length in bases (not windows.tsv's centre-to-centre distance).

N runs (assembly gaps, soft-masked repeats cleaned to N, bases past a chromosome end) are kept
as all-zero one-hot rows, as in the window shards, so positions along the span and its
length stay true. Each pair records how many between-segment bases are N (`between_n`), so
spans that are mostly gap can be dropped or down-weighted later without re-reading the genome.

Stored layout (`{split}/shard-NNNNN.safetensors`, at most `shard_size` pairs, N rows):

- `bases`: uint8 [total_bytes]. For each pair, the bases `[span_start - flank, span_end +
  flank)` (L = span length + 2 * flank), one-hot [L, 4] (A, C, G, T; N all zeros) packed
  exactly as `encode.pack_one_hot` packs a window (4 bits a base, big bit order). An odd L
  gets one all-zero nibble of padding, so every pair starts on a byte boundary; the pairs'
  bytes are concatenated in row order.
- `offsets`: int64 [N + 1], byte offsets of each pair in `bases` (`offsets[0] == 0`,
  `offsets[-1] == len(bases)`, `offsets[i + 1] - offsets[i] == ceil(lengths[i] / 2)`).
- `lengths`: int64 [N], stored bases of each pair (span length + 2 * flank).
- `segments`: int64 [N, 2], (`first_end`, `second_start`) in span coordinates; add `flank`
  for positions in the stored sequence.
- `enhancer_first`: uint8 [N], 1 when the enhancer is the first element in genome order.
- `between_n`: int64 [N], N bases in the between segment.
- `label`: uint8 [N]; `pair_id`: int64 [N]; `distance`: int64 [N], the span length.

`manifest.json` is written last, atomically, like the window shards': `format_version`
(`SPAN_SHARD_FORMAT`) with `kind: "span"`, `windows` (the window spec with `input: "span"`),
`flank`, `channels`, `packing`, `split`, every shard's path, split, rows, positives, bases
(sum of `lengths`) and SHA-256, and the inputs' checksums.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer import __version__
from epiformer.constants import ALPHABET, SPAN_SHARD_FORMAT, SPAN_SHARDS, WINDOW_SHARDS
from epiformer.encode import (
    ShardJob,
    pack_codes,
    split_record,
    window_spec_of,
    write_shard,
    write_shard_folder,
)
from epiformer.fileio import atomic_write_text
from epiformer.genome import Genome, N
from epiformer.shards import ShardError, map_safetensors, open_shard

SPAN_COLUMNS = ["pair_id", "chrom", "span_start", "span_end", "first_end", "second_start", "enhancer_first", "distance"]


def span_coordinates(windows: pd.DataFrame) -> pd.DataFrame:
    """Per pair of a windows table: `chrom`, `span_start`, `span_end` (genome coordinates), the segment
    boundaries `first_end` <= `second_start` (offsets within the span), `enhancer_first` and
    `distance` (the span length); rules in the module docstring. Pairs across chromosomes raise."""
    trans = windows["enhancer_chrom"].astype(str) != windows["promoter_chrom"].astype(str)
    if trans.any():
        shown = windows.loc[trans, ["pair_id", "enhancer_chrom", "promoter_chrom"]].head(5).to_records(index=False)
        raise ValueError(
            f"{int(trans.sum())} pairs have their elements on two chromosomes (pair_id, enhancer, promoter: "
            f"{', '.join(f'{p} {e} {c}' for p, e, c in shown)}); a span runs along one chromosome. "
            "Drop pairs across chromosomes from the windows table before encoding spans."
        )
    es, ee = windows["enhancer_start"].to_numpy(np.int64), windows["enhancer_end"].to_numpy(np.int64)
    ps, pe = windows["promoter_start"].to_numpy(np.int64), windows["promoter_end"].to_numpy(np.int64)
    enhancer_first = (es < ps) | ((es == ps) & (ee <= pe))
    first_start, first_end = np.where(enhancer_first, es, ps), np.where(enhancer_first, ee, pe)
    second_start, second_end = np.where(enhancer_first, ps, es), np.where(enhancer_first, pe, ee)
    span_end = np.maximum(first_end, second_end)
    overlapping = second_start < first_end
    cut = (second_start + np.minimum(first_end, second_end)) // 2  # midpoint of the overlap
    return pd.DataFrame(
        {
            "pair_id": windows["pair_id"].to_numpy(np.int64),
            "chrom": windows["enhancer_chrom"].astype(str).to_numpy(),
            "span_start": first_start,
            "span_end": span_end,
            "first_end": np.where(overlapping, cut, first_end) - first_start,
            "second_start": np.where(overlapping, cut, second_start) - first_start,
            "enhancer_first": enhancer_first,
            "distance": span_end - first_start,
        },
        columns=SPAN_COLUMNS,
    )


def encode_span_shard(genome: Genome, job: ShardJob, outdir: Path, flank: int) -> dict:
    """Encode and write one span shard (layout in the module docstring); returns its manifest entry."""
    spans = span_coordinates(job.windows)
    packed, lengths, between_n = [], [], []
    for chrom, start, end, first_end, second_start in spans[
        ["chrom", "span_start", "span_end", "first_end", "second_start"]
    ].itertuples(index=False):
        codes = genome.fetch_many([chrom], [start - flank], [end + flank])[0]  # (L,) ASCII, N-padded
        lengths.append(len(codes))
        between_n.append(int((codes[flank + first_end : flank + second_start] == N).sum()))
        if len(codes) % 2:
            codes = np.append(codes, np.uint8(N))  # an N packs to a zero nibble: the pair ends on a byte boundary
        packed.append(pack_codes(codes[None, :])[0])
    tensors = {
        "bases": np.concatenate(packed),
        "offsets": np.cumsum([0] + [len(p) for p in packed]).astype(np.int64),
        "lengths": np.asarray(lengths, dtype=np.int64),
        "segments": np.ascontiguousarray(spans[["first_end", "second_start"]].to_numpy(np.int64)),  # C order:
        # a DataFrame gives a Fortran-ordered array, whose raw bytes safetensors would store transposed
        "enhancer_first": spans["enhancer_first"].to_numpy(np.uint8),
        "between_n": np.asarray(between_n, dtype=np.int64),
        "label": job.windows["label"].to_numpy(dtype=np.uint8),
        "pair_id": job.windows["pair_id"].to_numpy(dtype=np.int64),
        "distance": spans["distance"].to_numpy(np.int64),
    }
    digest = write_shard(outdir / job.relative, tensors)
    return {
        "path": job.relative,
        "split": job.split,
        "rows": len(job.windows),
        "positives": int(tensors["label"].sum()),
        "bases": int(tensors["lengths"].sum()),
        "sha256": digest,
    }


def encode_span_shards(
    windows: pd.DataFrame,
    genome_path: str | Path,
    outdir: str | Path,
    flank: int,
    shard_size: int,
    pairs_sha256: str = "",
    windows_stats: dict | None = None,
    workers: int = 1,
) -> dict:
    """Write every split's span shards and `manifest.json` under `outdir`; returns the manifest.

    The same contract as `encode.encode_shards`: a re-run first clears what an interrupted
    run left, the manifest is written last, and the bytes do not depend on `workers`.
    """
    span_coordinates(windows)  # pairs across chromosomes fail here, before any shard is written
    outdir = Path(outdir)
    entries, genome_sha256 = write_shard_folder(
        encode_span_shard, windows, genome_path, outdir, flank, shard_size, workers
    )
    stats = windows_stats or {}
    manifest = {
        "format_version": SPAN_SHARD_FORMAT,
        "kind": SPAN_SHARDS,
        "epiformer_version": __version__,
        "channels": ALPHABET,
        "packing": "per pair: numpy.packbits(onehot[L, 4].reshape(-1), bitorder='big'), an odd L padded with "
        "a zero nibble; concatenated in `bases`, pair i at bases[offsets[i]:offsets[i + 1]]",
        "windows": {**window_spec_of(windows, stats.get("windows")), "input": "span"},
        "flank": flank,
        "split": split_record(windows_stats),
        "shards": entries,
        "inputs": {"pairs_sha256": pairs_sha256, "genome_index_sha256": genome_sha256},
    }
    atomic_write_text(outdir / "manifest.json", json.dumps(manifest, indent=2))
    return manifest


def load_span_manifest(shard_dir: str | Path) -> dict:
    """The manifest of a span shard folder; ShardError when missing or of another kind or format."""
    path = Path(shard_dir) / "manifest.json"
    if not path.exists():
        raise ShardError(f"{path} is missing: re-run the span encode step for this cell line.")
    manifest = json.loads(path.read_text())
    kind, version = manifest.get("kind", WINDOW_SHARDS), manifest.get("format_version")
    if kind != SPAN_SHARDS:
        raise ShardError(
            f"{path}: {kind!r} shards (format {version}), not span shards: span input reads shards written by "
            f"`epiformer.spans.encode_span_shards`. Re-encode {Path(shard_dir)} with span input."
        )
    if version != SPAN_SHARD_FORMAT:
        raise ShardError(
            f"{path}: span shard format {version}, this epiformer reads {SPAN_SHARD_FORMAT}. "
            f"Re-encode: delete {Path(shard_dir)} and run the span encode step again."
        )
    return manifest


class SpanShardSet:
    """One split's span shards: `bases` memory-mapped, the per-pair tensors read eagerly.

    `lengths` int64 [N] (stored bases), `segments` int64 [N, 2] (span coordinates),
    `enhancer_first` bool [N], `between_n` int64 [N], `label` uint8 [N], `pair_id` int64 [N],
    `distance` int64 [N] (span length), `flank`; `packed(row)` and `onehot(row)` give one pair.
    """

    EAGER = ("lengths", "segments", "enhancer_first", "between_n", "label", "pair_id", "distance")

    def __init__(self, shard_dir: str | Path, split: str, verify: bool = True):
        manifest = load_span_manifest(shard_dir)
        self.entries = [s for s in manifest["shards"] if s["split"] == split]
        if not self.entries:
            raise ShardError(f"{shard_dir}: manifest lists no span shards for the {split!r} split.")
        self.flank = int(manifest["flank"])
        self.windows = manifest["windows"]
        self.paths = [Path(shard_dir) / entry["path"] for entry in self.entries]
        columns = {name: [] for name in self.EAGER}
        self.offsets = []  # per shard, int64 [rows + 1]
        for path, entry in zip(self.paths, self.entries):
            tensors = self._check(path, entry, verify)
            for name in self.EAGER:
                columns[name].append(np.array(tensors[name]))
            self.offsets.append(np.array(tensors["offsets"]))
        for name, parts in columns.items():
            setattr(self, name, np.concatenate(parts))
        self.enhancer_first = self.enhancer_first.astype(bool)
        self.starts = np.cumsum([0] + [entry["rows"] for entry in self.entries])
        self._bases: list[np.memmap] | None = None

    def _check(self, path: Path, entry: dict, verify: bool) -> dict[str, np.memmap]:
        tensors = open_shard(path, entry, verify, step="the span encode step")
        rows = entry["rows"]
        expected = {name: (rows,) for name in self.EAGER} | {"segments": (rows, 2), "offsets": (rows + 1,)}
        for name, shape in expected.items():
            if name not in tensors or tensors[name].shape != shape:
                raise ShardError(
                    f"{path}: {name} has shape {getattr(tensors.get(name), 'shape', None)}, needs {shape}."
                )
        offsets, lengths = np.array(tensors["offsets"]), np.array(tensors["lengths"])
        if (
            offsets[0] != 0
            or offsets[-1] != len(tensors["bases"])
            or not np.array_equal(np.diff(offsets), (lengths + 1) // 2)
            or int(lengths.sum()) != entry["bases"]
        ):
            raise ShardError(f"{path}: offsets, lengths and bases disagree with each other or the manifest; re-encode.")
        segments = np.array(tensors["segments"])
        if not (
            (0 <= segments[:, 0]) & (segments[:, 0] <= segments[:, 1]) & (segments[:, 1] <= lengths - 2 * self.flank)
        ).all():
            raise ShardError(f"{path}: segment boundaries outside their spans (flank {self.flank}); re-encode.")
        return tensors

    def __len__(self) -> int:
        return len(self.label)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_bases": None}  # each worker process maps the files itself

    @property
    def between_n_fraction(self) -> np.ndarray:
        """float64 [N]: the fraction of the between segment that is N (0 where there is none)."""
        between = self.segments[:, 1] - self.segments[:, 0]
        return np.divide(self.between_n, between, out=np.zeros(len(self), dtype=np.float64), where=between > 0)

    def packed(self, row: int) -> np.ndarray:
        """uint8 [ceil(L / 2)]: the packed one-hot of pair `row` (a view into the memory map)."""
        if self._bases is None:
            self._bases = [map_safetensors(path)["bases"] for path in self.paths]
        shard = int(np.searchsorted(self.starts, row, side="right")) - 1
        local = row - self.starts[shard]
        return self._bases[shard][self.offsets[shard][local] : self.offsets[shard][local + 1]]

    def onehot(self, row: int) -> np.ndarray:
        """uint8 [L, 4]: pair `row` unpacked (channels A, C, G, T; N all zeros), padding trimmed."""
        return np.unpackbits(self.packed(row), bitorder="big").reshape(-1, 4)[: self.lengths[row]]
