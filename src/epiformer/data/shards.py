"""Reading shards back, without PyTorch: window shards (layout in `epiformer.data.encode`) and span
shards (layout in `epiformer.data.spans`); `load_split` tells the two kinds apart by their manifest.

A shard folder's manifest.json has its one writer (`write_manifest`, which both encoders call) and
its one reader (`read_manifest`, which the kind-checking loaders build on) here. Its `kind` is the
model input the shards serve, in ModelConfig.input's word: `elements` (omitted by element-window
manifests) or `span`.

Shards are memory-mapped, never loaded whole: a `ShardSet` parses each safetensors header
and maps the tensors in place, so RAM stays flat however many shards a split has; only
labels, pair ids and distances (17 bytes a pair) are read eagerly. Sequences stay bit-packed until a
batch is made, and are unpacked per batch (`epiformer.data.batches`).

`PackedPairs` holds pairs encoded on the fly (scoring new pairs) in memory and serves them
through the same interface as a `ShardSet`, so both go through the same batch building.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from epiformer.constants import ELEMENTS, ELEMENTS_INPUT, SEGMENT_IDS, SHARD_FORMAT, SPAN_INPUT, SPAN_SHARD_FORMAT
from epiformer.data.genome_store import GenomeStore, GenomeStoreError, store_manifest_sha256
from epiformer.io.files import atomic_write_text, sha256_file

SAFETENSORS_DTYPES = {"U8": np.uint8, "I64": np.int64}
MANIFEST = "manifest.json"


class ShardError(ValueError):
    """A shard that is missing, corrupt or does not match its manifest."""


def write_manifest(shard_dir: str | Path, manifest: dict) -> dict:
    """Write a shard folder's manifest.json atomically, after its shards: a folder with a manifest is whole."""
    atomic_write_text(Path(shard_dir) / MANIFEST, json.dumps(manifest, indent=2))
    return manifest


def read_manifest(shard_dir: str | Path) -> dict:
    """A shard folder's manifest.json as it stands, of either kind; ShardError when it is missing."""
    path = Path(shard_dir) / MANIFEST
    if not path.exists():
        raise ShardError(f"{path} is missing: re-run the encode step for this cell line.")
    return json.loads(path.read_text())


def load_manifest(shard_dir: str | Path) -> dict:
    """The manifest of a window shard folder; ShardError when missing or of another kind or format."""
    path = Path(shard_dir) / MANIFEST
    manifest = read_manifest(shard_dir)
    if shard_kind(manifest) != ELEMENTS_INPUT:
        raise ShardError(
            f"{path}: these are {manifest['kind']} shards (one sequence per pair); read them with "
            "data.shards.SpanShardSet (load_split reads either kind), or encode element windows for this model."
        )
    if manifest.get("format_version") != SHARD_FORMAT:
        raise ShardError(
            f"{path}: shard format {manifest.get('format_version')}, this epiformer reads {SHARD_FORMAT}. "
            f"Re-encode: delete {Path(shard_dir)} (or `snakemake --forcerun encode`) and run again."
        )
    return manifest


def window_widths(description: dict) -> dict[str, int]:
    """Each element's window width, from a shard manifest or a model.json (both carry `windows`)."""
    return {element: int(description["windows"][f"{element}_width"]) for element in ELEMENTS}


def data_fields(shard_dir) -> dict:
    """What metrics.json records about a model's data: the split (mode, whether leak-prone), the window spec."""
    manifest = shard_manifest(shard_dir)
    return {"split": manifest["split"], "windows": manifest["windows"]}


def map_safetensors(path: Path) -> dict[str, np.memmap]:
    """Memory-map every tensor of a safetensors file without reading its data."""
    with open(path, "rb") as handle:
        (header_size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(header_size))
    header.pop("__metadata__", None)
    data_start = 8 + header_size
    return {
        name: np.memmap(
            path,
            dtype=SAFETENSORS_DTYPES[info["dtype"]],
            mode="r",
            offset=data_start + info["data_offsets"][0],
            shape=tuple(info["shape"]),
        )
        for name, info in header.items()
    }


def open_shard(path: Path, entry: dict, verify: bool, step: str = "the encode step") -> dict[str, np.memmap]:
    """The memory-mapped tensors of one shard its manifest `entry` lists, its SHA-256 checked if `verify`."""
    if not path.exists():
        raise ShardError(f"{path} is listed in the manifest but missing: re-run {step}.")
    if verify and sha256_file(path) != entry["sha256"]:
        raise ShardError(f"{path}: SHA-256 differs from manifest.json (corrupt or foreign shard); re-encode.")
    try:
        return map_safetensors(path)
    except (ValueError, KeyError, struct.error) as error:
        raise ShardError(f"{path}: not a readable safetensors shard ({error}); re-encode.") from error


def pooled_manifest(shard_dirs: list[str | Path]) -> dict:
    """The manifest of several cell lines' shards read as one data set (training one model on all).

    Every folder must hold windows of the same widths, flank and window settings; the
    result is the first manifest with the shard entries of all (paths relative to their
    own folder, in `shard_dirs` order, with the folder in `dir` and its position in `source`),
    and the folders in `sources`.
    """
    manifests = [load_manifest(shard_dir) for shard_dir in shard_dirs]
    first = manifests[0]
    for shard_dir, manifest in zip(shard_dirs[1:], manifests[1:]):
        for key in ("windows", "flank", "split"):
            if manifest.get(key) != first.get(key):
                raise ShardError(
                    f"{shard_dir}: {key} {manifest.get(key)} differs from {shard_dirs[0]} "
                    f"({first.get(key)}); cell lines pooled into one model need the same windows."
                )
    shards = [
        {**entry, "dir": str(shard_dir), "source": source}
        for source, (shard_dir, m) in enumerate(zip(shard_dirs, manifests))
        for entry in m["shards"]
    ]
    return {
        **first,
        "shards": shards,
        "inputs": [m["inputs"] for m in manifests],
        "sources": [str(shard_dir) for shard_dir in shard_dirs],
    }


def shard_kind(manifest: dict) -> str:
    """The model input a shard manifest's shards serve: `elements` (element windows) or `span`."""
    return manifest.get("kind", ELEMENTS_INPUT)


def folder_kind(shard_dir: str | Path) -> str:
    """The model input a shard folder's shards serve (`shard_kind` of its manifest)."""
    return shard_kind(read_manifest(shard_dir))


def shard_manifest(shard_dir: str | Path | list) -> dict:
    """One folder's manifest (window or span shards), or the pooled manifest of a list of window shard folders."""
    if isinstance(shard_dir, (list, tuple)):
        return pooled_manifest(list(shard_dir))
    if folder_kind(shard_dir) == SPAN_INPUT:
        return load_span_manifest(shard_dir)
    return load_manifest(shard_dir)


def manifest_checksum(manifest: dict) -> str:
    """SHA-256 of a manifest (model.json's `data_manifest_sha256`): equal checksums, the same shards."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


class ShardSet:
    """One split's shards as a single memory-mapped table of pairs (of one folder, or pooled from several)."""

    def __init__(self, shard_dir: str | Path | list, split: str, verify: bool = True):
        pooled = isinstance(shard_dir, (list, tuple))
        manifest = pooled_manifest(list(shard_dir)) if pooled else load_manifest(shard_dir)  # refuses span shards
        self.entries = [s for s in manifest["shards"] if s["split"] == split]
        if not self.entries:
            raise ShardError(f"{shard_dir}: manifest lists no shards for the {split!r} split.")
        self.widths = window_widths(manifest)
        self.flank = int(manifest["flank"])
        self.lengths = {element: width + 2 * self.flank for element, width in self.widths.items()}  # stored bases
        self.paths = [Path(entry.get("dir", shard_dir)) / entry["path"] for entry in self.entries]
        labels, ids, distances = [], [], []
        for path, entry in zip(self.paths, self.entries):
            tensors = self._check(path, entry, verify)
            labels.append(np.array(tensors["label"]))
            ids.append(np.array(tensors["pair_id"]))
            distances.append(np.array(tensors["distance"]))
        self.label = np.concatenate(labels)  # uint8 [N]
        self.pair_id = np.concatenate(ids)  # int64 [N]; pooled cell lines may repeat ids
        self.distance = np.concatenate(distances)  # int64 [N], -1 across chromosomes
        # int64 [N]: which folder (cell line, when pooled) each pair comes from, its position in `shard_dir`
        self.source = np.repeat(
            [entry.get("source", 0) for entry in self.entries], [entry["rows"] for entry in self.entries]
        ).astype(np.int64)
        self.starts = np.cumsum([0] + [entry["rows"] for entry in self.entries])
        self._maps: list[dict[str, np.memmap]] | None = None

    def _check(self, path: Path, entry: dict, verify: bool) -> dict[str, np.memmap]:
        tensors = open_shard(path, entry, verify)
        for element in ELEMENTS:
            expected = (entry["rows"], self.lengths[element] // 2)
            if tensors[element].shape != expected:
                raise ShardError(f"{path}: {element} has shape {tensors[element].shape}, manifest says {expected}.")
        return tensors

    def __len__(self) -> int:
        return len(self.label)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": None}  # each worker process maps the files itself

    def packed(self, element: str, rows: np.ndarray) -> np.ndarray:
        """uint8 [len(rows), L/2] packed one-hot of `element` for the given pair rows (any order)."""
        if self._maps is None:
            self._maps = [map_safetensors(path) for path in self.paths]
        shard_of_row = np.searchsorted(self.starts, rows, side="right") - 1
        out = np.empty((len(rows), self.lengths[element] // 2), dtype=np.uint8)
        for shard in np.unique(shard_of_row):
            here = shard_of_row == shard
            out[here] = self._maps[shard][element][rows[here] - self.starts[shard]]
        return out


class PackedPairs:
    """Packed pairs held in memory, read like a `ShardSet` (same `packed`, `lengths`, `flank`, ...).

    `enhancer`, `promoter`: uint8 [N, L/2] as `encode.encode_windows` returns them;
    `pair_id`: int64 [N]; `distance`: int64 [N] as in windows.tsv; `label`: [N], zeros when unknown.
    """

    def __init__(
        self,
        tensors: dict[str, np.ndarray],
        pair_id: np.ndarray,
        distance: np.ndarray,
        label: np.ndarray | None = None,
        flank: int = 0,
    ):
        self._tensors = {element: tensors[element] for element in ELEMENTS}
        self.lengths = {element: 2 * packed.shape[1] for element, packed in self._tensors.items()}  # stored bases
        self.flank = flank
        self.widths = {element: length - 2 * flank for element, length in self.lengths.items()}
        self.pair_id = np.asarray(pair_id, dtype=np.int64)
        self.distance = np.asarray(distance, dtype=np.int64)
        self.source = np.zeros(len(self.pair_id), dtype=np.int64)  # one source: the pairs being scored
        self.label = np.zeros(len(self.pair_id), dtype=np.uint8) if label is None else np.asarray(label)

    def __len__(self) -> int:
        return len(self.pair_id)

    def packed(self, element: str, rows: np.ndarray) -> np.ndarray:
        """uint8 [len(rows), L/2] packed one-hot of `element` for the given pair rows."""
        return self._tensors[element][rows]


def load_span_manifest(shard_dir: str | Path) -> dict:
    """The manifest of a span shard folder; ShardError when missing or of another kind or format."""
    path = Path(shard_dir) / MANIFEST
    manifest = read_manifest(shard_dir)
    kind, version = shard_kind(manifest), manifest.get("format_version")
    if kind != SPAN_INPUT:
        raise ShardError(
            f"{path}: {kind!r} shards (format {version}), not span shards: span input reads shards written by "
            f"`epiformer.data.spans.encode_span_shards`. Re-encode {Path(shard_dir)} with span input."
        )
    if version != SPAN_SHARD_FORMAT:
        raise ShardError(
            f"{path}: span shard format {version}, this epiformer reads {SPAN_SHARD_FORMAT}. "
            f"Re-encode: delete {Path(shard_dir)} and run the span encode step again."
        )
    return manifest


_verified_stores: set[tuple[str, str]] = set()  # (folder, manifest SHA-256) checked block by block in this process


def open_genome_store(shard_dir: Path, manifest: dict, verify: bool) -> GenomeStore:
    """The genome store a span shard folder's manifest names, checked to be the one its shards were cut from.

    With `verify`, every block's SHA-256 is checked once per process (a store is shared by
    every split, cell line and model of a genome).
    """
    record = manifest["genome_store"]
    folder = (Path(shard_dir) / record["path"]).resolve()
    try:
        store = GenomeStore(folder)
    except GenomeStoreError as error:
        raise ShardError(f"{Path(shard_dir) / MANIFEST} reads its sequence from a genome store: {error}") from None
    if store_manifest_sha256(folder) != record["manifest_sha256"]:
        raise ShardError(
            f"{folder}: this genome store is not the one {Path(shard_dir)} was encoded from (its manifest's "
            "SHA-256 differs): it was rebuilt, maybe from another genome. Re-run the span encode step "
            f"(delete {Path(shard_dir)})."
        )
    key = (str(folder), record["manifest_sha256"])
    if verify and key not in _verified_stores:
        try:
            store.verify()
        except GenomeStoreError as error:
            raise ShardError(str(error)) from None
        _verified_stores.add(key)
    return store


def segment_ids(positions, first_end, second_start, enhancer_first) -> np.ndarray:
    """`constants.SEGMENT_IDS` of span positions (span coordinates; arrays broadcast): the first element before
    `first_end`, between up to `second_start`, the second element after (`data.spans` defines the cut)."""
    first = np.where(enhancer_first, SEGMENT_IDS["enhancer"], SEGMENT_IDS["promoter"])
    second = np.where(enhancer_first, SEGMENT_IDS["promoter"], SEGMENT_IDS["enhancer"])
    return np.where(positions < first_end, first, np.where(positions < second_start, SEGMENT_IDS["between"], second))


class Spans:
    """Pairs as spans: coordinates, segments and labels, each span's bases cut from a sequence source on demand.

    `source` is anything with `one_hot(chrom, start, end)` (uint8 [L, 4], N and past the
    chromosome ends all zeros): the genome store for span shards (`SpanShardSet`), the genome
    FASTA for new pairs (`data.spans.spans_of_windows`). `chrom_names` [C]; per pair: `chrom` int64 [N]
    (into chrom_names), `span_start` int64 [N], `lengths` int64 [N] (stored bases: span + 2 *
    flank), `segments` int64 [N, 2] (span coordinates), `enhancer_first` bool [N], `label`
    uint8 [N], `pair_id` int64 [N], `distance` int64 [N] (span length), `source` int64 [N]
    (all 0: spans are not pooled across cell lines), `flank`.
    """

    def __init__(
        self, source, chrom_names, chrom, span_start, lengths, segments, enhancer_first, label, pair_id, flank: int
    ):
        self._source, self.chrom_names, self.flank = source, list(chrom_names), int(flank)
        self.chrom = np.asarray(chrom, dtype=np.int64)
        self.span_start = np.asarray(span_start, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.segments = np.asarray(segments, dtype=np.int64).reshape(-1, 2)
        self.enhancer_first = np.asarray(enhancer_first).astype(bool)
        self.label = np.asarray(label, dtype=np.uint8)
        self.pair_id = np.asarray(pair_id, dtype=np.int64)
        self.source = np.zeros(len(self.label), dtype=np.int64)
        if len(self.chrom) and not (0 <= self.chrom.min() and self.chrom.max() < len(self.chrom_names)):
            raise ShardError(f"chromosome indices outside the source's {len(self.chrom_names)} sequences.")

    @property
    def distance(self) -> np.ndarray:
        """int64 [N]: each span's length (not windows.tsv's centre-to-centre distance)."""
        return self.lengths - 2 * self.flank

    def __len__(self) -> int:
        return len(self.label)

    @property
    def sequence_source(self):
        return self._source

    def coordinates(self, row: int) -> tuple[str, int, int]:
        """(chrom, start, end) of pair `row`'s stored bases: its span and `flank` bases each side."""
        start = int(self.span_start[row]) - self.flank
        return self.chrom_names[int(self.chrom[row])], start, start + int(self.lengths[row])

    def onehot(self, row: int) -> np.ndarray:
        """uint8 [L, 4]: pair `row`'s bases, flanks included (channels A, C, G, T; N all zeros)."""
        return self.sequence_source.one_hot(*self.coordinates(row))


class SpanShardSet(Spans):
    """One split's span shards: `Spans` whose per-pair tensors are read from the shards, eagerly, and whose
    bases are cut from the genome store the manifest names; also `between_n` int64 [N] and `packed(row)`.
    """

    EAGER = ("chrom", "span_start", "lengths", "segments", "enhancer_first", "label", "pair_id", "between_n")

    def __init__(self, shard_dir: str | Path, split: str, verify: bool = True):
        manifest = load_span_manifest(shard_dir)
        self.entries = [s for s in manifest["shards"] if s["split"] == split]
        if not self.entries:
            raise ShardError(f"{shard_dir}: manifest lists no span shards for the {split!r} split.")
        self.flank = int(manifest["flank"])
        self.windows = manifest["windows"]
        self.shard_dir, self.manifest = Path(shard_dir), manifest
        self.paths = [Path(shard_dir) / entry["path"] for entry in self.entries]
        columns = {name: [] for name in self.EAGER}
        for path, entry in zip(self.paths, self.entries):
            tensors = self._check(path, entry, verify)
            for name in self.EAGER:
                columns[name].append(np.array(tensors[name]))
        column = {name: np.concatenate(parts) for name, parts in columns.items()}
        self.between_n = column.pop("between_n")
        store = open_genome_store(self.shard_dir, manifest, verify)
        try:
            super().__init__(store, list(store.sizes), **column, flank=self.flank)
        except ShardError as error:
            raise ShardError(f"{shard_dir}: {error} Re-encode the spans.") from None

    def _check(self, path: Path, entry: dict, verify: bool) -> dict[str, np.memmap]:
        tensors = open_shard(path, entry, verify, step="the span encode step")
        rows = entry["rows"]
        expected = {name: (rows,) for name in (*self.EAGER, "distance")} | {"segments": (rows, 2)}
        for name, shape in expected.items():
            if name not in tensors or tensors[name].shape != shape:
                raise ShardError(
                    f"{path}: {name} has shape {getattr(tensors.get(name), 'shape', None)}, needs {shape}."
                )
        lengths, segments = np.array(tensors["lengths"]), np.array(tensors["segments"])
        if int(lengths.sum()) != entry["bases"] or not np.array_equal(lengths - 2 * self.flank, tensors["distance"]):
            raise ShardError(f"{path}: lengths, distances and the manifest's bases disagree; re-encode.")
        if not (
            (0 <= segments[:, 0]) & (segments[:, 0] <= segments[:, 1]) & (segments[:, 1] <= lengths - 2 * self.flank)
        ).all():
            raise ShardError(f"{path}: segment boundaries outside their spans (flank {self.flank}); re-encode.")
        return tensors

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_source": None}  # each worker process maps the store itself

    @property
    def sequence_source(self) -> GenomeStore:
        if self._source is None:
            self._source = open_genome_store(self.shard_dir, self.manifest, verify=False)  # checked by the parent
        return self._source

    @property
    def between_n_fraction(self) -> np.ndarray:
        """float64 [N]: the fraction of the between segment that is N (0 where there is none)."""
        between = self.segments[:, 1] - self.segments[:, 0]
        return np.divide(self.between_n, between, out=np.zeros(len(self), dtype=np.float64), where=between > 0)

    def packed(self, row: int) -> np.ndarray:
        """uint8 [ceil(L / 2)]: the packed one-hot of pair `row`, cut from the genome store."""
        return self.sequence_source.packed(*self.coordinates(row))


def load_split(shard_dir: str | Path | list, split: str, verify: bool = True):
    """One split's shards, checked against the manifest (hashes, shapes, row counts); a list pools folders.

    A `ShardSet` for window shards, a `SpanShardSet` for span shards.
    """
    if not isinstance(shard_dir, (list, tuple)) and folder_kind(shard_dir) == SPAN_INPUT:
        return SpanShardSet(shard_dir, split, verify)
    if isinstance(shard_dir, (list, tuple)) and any(folder_kind(folder) == SPAN_INPUT for folder in shard_dir):
        raise ShardError(
            f"{', '.join(map(str, shard_dir))}: span shards cannot be pooled across cell lines yet; "
            "train span models per cell line (pooled: false)."
        )
    return ShardSet(shard_dir, split, verify)
