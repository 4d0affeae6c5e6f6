"""Variant effects on pair scores (`epiformer variants`): each VCF variant in a pair's windows, scored.

Pairs are placed, encoded and scored exactly as `epiformer predict` does (`epiformer.scoring.new_pairs`:
the model's recorded window settings, centred windows, no augmentation), so a row's
`ref_score` is the pair's predict score. For each variant allele inside a pair's enhancer or
promoter window (or both, where they overlap), the pair's encoded windows are copied, the
allele's bases written into them (`encode.write_bases`), and the copies batched through the
model: `alt_score` is the score predict gives that pair on the genome carrying that one
allele (tested). SNVs and equal-length substitutions (MNVs) are scored; indels are not, as
they would shift every base after them.

A span model reads everything from the first element window to the second, so a variant
anywhere in a pair's span is scored, between the elements included: its copy of the span
reads the genome's bases with the allele written in (`AlleleSpans`), and `element` is the
segment of the span holding the allele's first base: enhancer, promoter or between.

Outputs, both written only once every check has passed:
- variants TSV (VARIANT_COLUMNS): one row per (pair, allele), by pair_id then pos then VCF
  line. `pos` is 1-based as in the VCF; `element` is enhancer, promoter or both (the
  windows the allele overlaps; for a span model, enhancer, promoter or between, the segment
  of its first base); `delta` = alt_score - ref_score; scores as predict writes
  them (SCORE_FORMAT). A multi-allelic record gives one row per ALT allele.
- unscored TSV (UNSCORED_VARIANT_COLUMNS): one row per allele that no pair scores, in file
  order, with the reason (UNSCORED_REASONS).

Every record is checked against the genome (chromosome present, REF equal to the genome's
bases), and a malformed VCF line stops the run (`epiformer.io.vcf`); errors name the VCF line.
Memory: the VCF is read one record at a time (the unscored rows go straight to disk); the
alleles inside windows, the pairs and the output rows are held; pairs are scored
CHUNK_PAIRS at a time and alleles CHUNK_PAIRS copies at a time.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from epiformer.constants import ALPHABET, ELEMENTS, SCORE_FORMAT, SEGMENT_IDS, WINDOW_FIELDS
from epiformer.data.chromosomes import flip_chr
from epiformer.data.genome import Genome
from epiformer.data.shards import PackedPairs, Spans, segment_ids
from epiformer.data.spans import span_coordinates, spans_of_windows
from epiformer.data.windows import WindowSpec, place_pair_windows, place_windows
from epiformer.inference.trained_model import TrainedModel, predict_split
from epiformer.io.files import atomic_outputs
from epiformer.io.runlog import progress
from epiformer.io.vcf import VcfError, VcfRecord, count_data_lines, read_vcf
from epiformer.model.configs import SCORING_BATCH_SIZE, SCORING_TOKENS
from epiformer.scoring.new_pairs import (
    CHUNK_PAIRS,
    load_scoring_model,
    packed_pairs,
    read_pairs_to_score,
    unscored_path_for,
)
from epiformer.sequence.onehot import ONE_HOT_TABLE, write_bases

log = logging.getLogger(__name__)
VARIANT_COLUMNS = ["pair_id", "chrom", "pos", "ref", "alt", "element", "ref_score", "alt_score", "delta", "id", "line"]
UNSCORED_VARIANT_COLUMNS = ["chrom", "pos", "ref", "alt", "line", "reason"]
UNSCORED_REASONS = {
    "outside_every_window": "in no window (a span model: no span) of any pair",
    "only_in_unscored_pairs": "only in windows (spans) of pairs predict leaves unscored (see predict's reasons)",
    "no_alt": "ALT is `.`: no alternative allele",
    "alt_not_acgt": "ALT is not made of A, C, G, T (symbolic `<DEL>`, `*`, N, ...)",
    "ref_not_acgt": "REF holds an N",
    "indel": "REF and ALT differ in length: indels are not scored",
}
ACGT = frozenset(ALPHABET)


class IntervalUnion:
    """The union of (chrom, start, end) intervals, 0-based half-open, asked whether a range overlaps it."""

    def __init__(self, chroms, starts, ends):
        self._merged = {}
        frame = pd.DataFrame({"chrom": chroms, "start": starts, "end": ends}).sort_values(["chrom", "start"])
        for chrom, group in frame.groupby("chrom", sort=False):
            starts, ends = group["start"].to_numpy(), group["end"].to_numpy()
            reach = np.maximum.accumulate(ends)
            first = np.flatnonzero(np.r_[True, starts[1:] > reach[:-1]])  # intervals that open a merged one
            self._merged[chrom] = (starts[first].tolist(), np.maximum.reduceat(ends, first).tolist())

    def overlaps(self, chrom: str, start: int, end: int) -> bool:
        starts, ends = self._merged.get(chrom, ((), ()))
        last = bisect.bisect_left(starts, end) - 1  # the last merged interval starting before `end`
        return last >= 0 and ends[last] > start


def element_windows(windows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """chrom, start, end of every enhancer and promoter window of a windows table, one after the other."""
    return tuple(np.concatenate([windows[f"{e}_{field}"].to_numpy() for e in ELEMENTS]) for field in WINDOW_FIELDS)


def span_intervals(windows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """chrom, start, end of what a span model reads of each pair: its span; a pair across chromosomes, its windows."""
    cis = windows["enhancer_chrom"].astype(str) == windows["promoter_chrom"].astype(str)
    spans = span_regions(windows[cis])
    trans = element_windows(windows[~cis])
    return tuple(np.concatenate([spans[f"span_{field}"].to_numpy(), part]) for field, part in zip(WINDOW_FIELDS, trans))


def unscored_pair_windows(pairs: pd.DataFrame, pair_ids, sizes: dict[str, int], spec: WindowSpec) -> pd.DataFrame:
    """Where the windows of pairs left unscored would lie (the window rule, kept inside their chromosomes)."""
    pairs = pairs[pairs["pair_id"].isin(pair_ids)]
    windows = {}
    for element in ELEMENTS:
        chroms = pairs[f"{element}_chrom"].to_numpy()
        width = spec.width(element)
        starts, _ = place_windows(
            pairs[f"{element}_start"], pairs[f"{element}_end"], width, pd.Series(chroms).map(sizes), "shift"
        )
        windows.update({f"{element}_chrom": chroms, f"{element}_start": starts, f"{element}_end": starts + width})
    return pd.DataFrame({"pair_id": pairs["pair_id"].to_numpy(), **windows})


def unscored_reason(ref: str, alt: str) -> str | None:
    """Why an allele inside a scored pair's window cannot be scored, or None."""
    if alt == ".":
        return "no_alt"
    if not set(alt) <= ACGT:
        return "alt_not_acgt"
    if not set(ref) <= ACGT:
        return "ref_not_acgt"
    if len(ref) != len(alt):
        return "indel"
    return None


@dataclass
class Alleles:
    """The alleles to score, in VCF order: columns chrom, start (0-based), ref, alt, id, line."""

    table: pd.DataFrame

    def by_chromosome(self) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """chrom -> (starts sorted, their rows in `table`, their ends)."""
        grouped = {}
        ends = (self.table["start"] + self.table["ref"].str.len()).to_numpy()
        for chrom, rows in self.table.groupby("chrom", sort=False).indices.items():
            rows = rows[np.argsort(self.table["start"].to_numpy()[rows], kind="stable")]
            grouped[chrom] = (self.table["start"].to_numpy()[rows], rows, ends[rows])
        return grouped


def read_alleles(vcf_path, genome: Genome, scored: IntervalUnion, unscored: IntervalUnion, unscored_out: Path) -> dict:
    """Check every record of the VCF; write the alleles no pair scores to `unscored_out`; return the rest.

    Returns {"alleles": Alleles, "records": n, "unscored": counts by reason}.
    """
    rows, counts, records = [], {}, 0
    total = count_data_lines(vcf_path)
    with open(unscored_out, "w") as out:
        out.write("\t".join(UNSCORED_VARIANT_COLUMNS) + "\n")
        for record in progress(read_vcf(vcf_path), total, f"reading {total:,} VCF records"):
            records += 1
            check_against_genome(record, genome, vcf_path)
            end = record.start + len(record.ref)
            if scored.overlaps(record.chrom, record.start, end):
                where = None
            elif unscored.overlaps(record.chrom, record.start, end):
                where = "only_in_unscored_pairs"
            else:
                where = "outside_every_window"
            for alt in record.alts or (".",):
                reason = where or unscored_reason(record.ref, alt)
                if reason is None:
                    rows.append((record.chrom, record.start, record.ref, alt, record.id, record.line))
                    continue
                counts[reason] = counts.get(reason, 0) + 1
                out.write(f"{record.chrom}\t{record.pos}\t{record.ref}\t{alt}\t{record.line}\t{reason}\n")
    table = pd.DataFrame(rows, columns=["chrom", "start", "ref", "alt", "id", "line"])
    table = table.astype({"chrom": str, "start": np.int64, "ref": str, "alt": str, "id": str, "line": np.int64})
    return {"alleles": Alleles(table), "records": records, "unscored": counts}


def overlapping_alleles(windows: pd.DataFrame, grouped: dict, longest: int, regions=ELEMENTS) -> pd.DataFrame:
    """`row` (of `windows`), `allele` (row of the Alleles table) and one bool column per region, for every
    allele that overlaps a region of that row's pair (regions: the `{region}_chrom/start/end` columns)."""
    found = []
    for element in regions:
        chroms = windows[f"{element}_chrom"].to_numpy()
        for chrom in pd.unique(chroms):
            if chrom not in grouped:
                continue
            starts, alleles, ends = grouped[chrom]
            rows = np.flatnonzero(chroms == chrom)
            window_starts = windows[f"{element}_start"].to_numpy()[rows]
            window_ends = windows[f"{element}_end"].to_numpy()[rows]
            first = np.searchsorted(starts, window_starts - longest + 1)  # no allele starting before can reach in
            last = np.searchsorted(starts, window_ends)
            counts = last - first
            index = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(first, counts)
            hit_rows = np.repeat(rows, counts)
            inside = ends[index] > np.repeat(window_starts, counts)
            found.append(pd.DataFrame({"row": hit_rows[inside], "allele": alleles[index[inside]], "element": element}))
    columns = {"row": np.zeros(0, np.int64), "allele": np.zeros(0, np.int64), "element": ""}
    hits = pd.concat([pd.DataFrame(columns), *found], ignore_index=True)
    for element in regions:
        hits[element] = hits["element"] == element
    hits = hits.groupby(["row", "allele"], as_index=False)[list(regions)].any()  # sorted by row, allele
    return hits.astype({"row": np.int64, "allele": np.int64})


def with_alleles(data: PackedPairs, windows: pd.DataFrame, hits: pd.DataFrame, alleles: pd.DataFrame) -> PackedPairs:
    """One copy of row hits.row of `data` per hit, carrying the hit's allele in the windows it overlaps."""
    rows = hits["row"].to_numpy()
    starts = alleles["start"].to_numpy()[hits["allele"].to_numpy()]
    alts = alleles["alt"].to_numpy()[hits["allele"].to_numpy()]
    lengths = np.fromiter((len(alt) for alt in alts), np.int64, len(alts))
    copy = np.repeat(np.arange(len(hits)), lengths)  # one entry per base of each allele
    offset = np.arange(len(copy)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    codes = np.frombuffer("".join(alts).encode("ascii"), dtype=np.uint8)
    tensors = {}
    for element in ELEMENTS:
        packed = data.packed(element, rows).copy()
        position = starts[copy] + offset - windows[f"{element}_start"].to_numpy()[rows][copy]
        inside = hits[element].to_numpy()[copy] & (position >= 0) & (position < data.widths[element])
        write_bases(packed, copy[inside], position[inside], codes[inside])
        tensors[element] = packed
    return PackedPairs(tensors, data.pair_id[rows], data.distance[rows])


def span_regions(windows: pd.DataFrame) -> pd.DataFrame:
    """`span_chrom, span_start, span_end` of each row of a windows table: what a span model reads of the pair."""
    spans = span_coordinates(windows)
    return pd.DataFrame(
        {"span_chrom": spans["chrom"], "span_start": spans["span_start"], "span_end": spans["span_end"]}
    )


class AlleleSpans(Spans):
    """Copies of some spans, copy i carrying allele i: the genome's bases with the allele's written in."""

    def __init__(self, spans: Spans, rows: np.ndarray, starts: np.ndarray, alts: np.ndarray):
        super().__init__(
            spans.sequence_source,
            spans.chrom_names,
            spans.chrom[rows],
            spans.span_start[rows],
            spans.lengths[rows],
            spans.segments[rows],
            spans.enhancer_first[rows],
            spans.label[rows],
            spans.pair_id[rows],
            spans.flank,
        )
        self.allele_starts, self.alts = starts, alts

    def onehot(self, row: int) -> np.ndarray:
        bases = super().onehot(row).copy()
        position = (
            int(self.allele_starts[row]) - (int(self.span_start[row]) - self.flank) + np.arange(len(self.alts[row]))
        )
        inside = (position >= 0) & (position < len(bases))
        bases[position[inside]] = ONE_HOT_TABLE[np.frombuffer(self.alts[row].encode("ascii"), np.uint8)[inside]]
        return bases


def span_segment_names(spans: Spans, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The segment of each span `rows[i]` (enhancer, promoter or between) that holds position `starts[i]`."""
    offset = starts - spans.span_start[rows]  # span coordinates; an allele starting before the span: its first segment
    ids = segment_ids(offset, spans.segments[rows, 0], spans.segments[rows, 1], spans.enhancer_first[rows])
    names = {number: name for name, number in SEGMENT_IDS.items()}
    return np.array([names[number] for number in ids.tolist()], dtype=object)


def score_span_alleles(model, genome: Genome, windows, hits, alleles, device, max_tokens: int) -> pd.DataFrame:
    """As score_pair_alleles, for a span model: hits anywhere in the pairs' spans (`hits.row` indexes `windows`)."""
    spans = spans_of_windows(windows, genome, list(genome.sizes))
    ref_scores = predict_split(model, spans, device=device, max_tokens=max_tokens)[0]
    rows, allele = hits["row"].to_numpy(), hits["allele"].to_numpy()
    starts, alts = alleles["start"].to_numpy()[allele], alleles["alt"].to_numpy()[allele]
    alt_scores = np.zeros(len(hits), dtype=np.float32)
    for offset in range(0, len(hits), CHUNK_PAIRS):
        part = slice(offset, offset + CHUNK_PAIRS)
        copies = AlleleSpans(spans, rows[part], starts[part], alts[part])
        alt_scores[part] = predict_split(model, copies, device=device, max_tokens=max_tokens)[0]
    return allele_rows(windows, hits, alleles, ref_scores[rows], alt_scores, span_segment_names(spans, rows, starts))


def allele_rows(windows, hits, alleles, ref_score, alt_scores, element) -> pd.DataFrame:
    """VARIANT_COLUMNS (and `allele`) of scored hits."""
    chosen = alleles.iloc[hits["allele"].to_numpy()]
    return pd.DataFrame(
        {
            "pair_id": windows["pair_id"].to_numpy()[hits["row"].to_numpy()],
            "chrom": chosen["chrom"].to_numpy(),
            "pos": chosen["start"].to_numpy() + 1,
            "ref": chosen["ref"].to_numpy(),
            "alt": chosen["alt"].to_numpy(),
            "element": element,
            "ref_score": ref_score,
            "alt_score": alt_scores,
            "delta": alt_scores.astype(np.float64) - ref_score.astype(np.float64),
            "id": chosen["id"].to_numpy(),
            "line": chosen["line"].to_numpy(),
            "allele": hits["allele"].to_numpy(),
        }
    )


def score_pair_alleles(
    model: TrainedModel,
    genome: Genome,
    windows: pd.DataFrame,
    hits: pd.DataFrame,
    alleles: pd.DataFrame,
    batch_size: int,
    device: torch.device,
) -> pd.DataFrame:
    """VARIANT_COLUMNS for the hits of some pairs' windows (`hits.row` indexes `windows`)."""
    rows = np.unique(hits["row"].to_numpy())
    windows = windows.iloc[rows].reset_index(drop=True)
    hits = hits.assign(row=np.searchsorted(rows, hits["row"].to_numpy()))
    data = packed_pairs(genome, windows)  # each pair's windows encoded once
    ref_scores, _, _ = predict_split(model, data, batch_size, device)
    alt_scores = np.zeros(len(hits), dtype=np.float32)
    for offset in range(0, len(hits), CHUNK_PAIRS):
        part = hits.iloc[offset : offset + CHUNK_PAIRS]
        alt_scores[offset : offset + len(part)] = predict_split(
            model, with_alleles(data, windows, part, alleles), batch_size, device
        )[0]
    enhancer, promoter = hits["enhancer"].to_numpy(), hits["promoter"].to_numpy()
    element = np.where(enhancer & promoter, "both", np.where(enhancer, "enhancer", "promoter"))
    return allele_rows(windows, hits, alleles, ref_scores[hits["row"].to_numpy()], alt_scores, element)


def score_alleles(model, genome, windows, alleles: Alleles, batch_size: int, device) -> pd.DataFrame:
    """VARIANT_COLUMNS for every allele in what each pair's model reads (its windows, or its span), by pair_id,
    pos and VCF order; pairs by chunk."""
    windows = windows.sort_values("pair_id", ignore_index=True)
    reads_spans = model.config.reads_spans
    grouped = alleles.by_chromosome()
    longest = int(alleles.table["ref"].str.len().max()) if len(alleles.table) else 1
    offsets = range(0, len(windows), CHUNK_PAIRS)
    parts = []
    for offset in progress(offsets, len(offsets), f"scoring {len(alleles.table):,} alleles in {len(windows):,} pairs"):
        chunk = windows.iloc[offset : offset + CHUNK_PAIRS].reset_index(drop=True)
        if reads_spans:
            hits = overlapping_alleles(span_regions(chunk), grouped, longest, regions=("span",))
        else:
            hits = overlapping_alleles(chunk, grouped, longest)
        if not len(hits):
            continue
        if reads_spans:
            scored = score_span_alleles(model, genome, chunk, hits, alleles.table, device, SCORING_TOKENS)
        else:
            scored = score_pair_alleles(model, genome, chunk, hits, alleles.table, batch_size, device)
        parts.append(scored.sort_values(["pair_id", "pos", "allele"], kind="stable")[VARIANT_COLUMNS])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=VARIANT_COLUMNS)


def score_variants(
    model_dir: str | Path,
    genome_path: str | Path,
    pairs_path: str | Path,
    vcf_path: str | Path,
    out_path: str | Path,
    unscored_path: str | Path | None = None,
    batch_size: int = SCORING_BATCH_SIZE,
    device: torch.device | str = "cpu",
    edge: str | None = None,
    max_n_fraction: float | None = None,
    allow_trans: bool | None = None,
) -> dict:
    """Score every allele of `vcf_path` in the windows of every pair of `pairs_path` (see module docstring).

    Window settings as `epiformer.scoring.predict.predict_pairs`. Nothing is written unless every
    check passes. Returns records, alleles_scored, rows, unscored (counts by reason) and paths.
    """
    unscored_path = Path(unscored_path) if unscored_path else unscored_path_for(out_path)
    device = torch.device(device)
    model, spec = load_scoring_model(model_dir, device, edge, max_n_fraction, allow_trans)
    pairs = read_pairs_to_score(pairs_path, spec.tss_annotation)
    with Genome(genome_path) as genome, atomic_outputs(out_path, unscored_path) as (out_tmp, unscored_tmp):
        windows, left_out = place_pair_windows(pairs, genome, spec)
        if len(left_out):
            log.warning("%d pair(s) cannot be scored (as in predict); their variants are not scored", len(left_out))
        read_regions = span_intervals if model.config.reads_spans else element_windows
        scored = IntervalUnion(*read_regions(windows))
        left_out_windows = unscored_pair_windows(pairs, left_out["pair_id"], genome.sizes, spec)
        unscored = IntervalUnion(*read_regions(left_out_windows))
        read = read_alleles(vcf_path, genome, scored, unscored, unscored_tmp)
        log.info(
            "Read %d VCF records from %s: %d allele(s) in pair windows to score",
            read["records"],
            vcf_path,
            len(read["alleles"].table),
        )
        rows = score_alleles(model, genome, windows, read["alleles"], batch_size, device)
        out_tmp.write_text(rows.to_csv(sep="\t", index=False, float_format=SCORE_FORMAT))
    counts = read["unscored"]
    log.info("Scored %d allele(s) in %d (pair, allele) rows -> %s", len(read["alleles"].table), len(rows), out_path)
    if counts:
        log.warning(
            "%d allele(s) not scored (%s); listed with their VCF lines in %s",
            sum(counts.values()),
            ", ".join(f"{reason}: {n}" for reason, n in counts.items()),
            unscored_path,
        )
    return {
        "records": read["records"],
        "alleles_scored": len(read["alleles"].table),
        "rows": len(rows),
        "unscored": counts,
        "out": str(out_path),
        "unscored_path": str(unscored_path),
    }


def check_against_genome(record: VcfRecord, genome: Genome, vcf_path: str | Path) -> None:
    """Fail when the record's chromosome is not in the genome, or its REF is not the genome's bases there.

    Only REF's A/C/G/T are compared: a VCF's N may stand for any base.
    """
    where = f"{vcf_path}, line {record.line}"
    if record.chrom not in genome.sizes:
        known = ", ".join(list(genome.sizes)[:5]) + (", ..." if len(genome.sizes) > 5 else "")
        flipped = flip_chr(record.chrom)
        hint = (
            f" The genome names it {flipped!r}: only the `chr` prefix differs; rename the VCF's chromosomes "
            "(`bcftools annotate --rename-chrs`) or use a genome named like the VCF."
            if flipped in genome.sizes
            else " Use the genome the VCF was called on, or remove the records on that sequence."
        )
        raise VcfError(f"{where}: chromosome {record.chrom!r} is not in genome {genome.path} (it has {known}).{hint}")
    end = record.start + len(record.ref)
    if end > genome.sizes[record.chrom]:
        raise VcfError(
            f"{where}: {record.chrom}:{record.pos} (REF {record.ref}) is past the end of {record.chrom} "
            f"({genome.sizes[record.chrom]:,} bp) in genome {genome.path}. The VCF was called on another build "
            "of the genome: give that build's FASTA."
        )
    bases = genome.fetch(record.chrom, record.start, end).decode()
    if any(given != found for given, found in zip(record.ref, bases) if given != "N"):
        raise VcfError(
            f"{where}: REF {record.ref} at {record.chrom}:{record.pos} disagrees with genome {genome.path}, which "
            f"has {bases} there. The VCF was probably called on another build of the genome: give that build's "
            "FASTA, or lift the VCF over to this one."
        )
