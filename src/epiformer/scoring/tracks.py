"""Browser tracks of predicted enhancer-promoter interactions: BEDPE, UCSC interact, bigInteract.

Inputs: a pairs file in any format `epiformer.data.pairs.read_pairs` reads (TargetFinder CSV or
BEDPE), and a scores table of those pairs: tab-separated with a header, `pair_id, score`
and optionally `label`, as `epiformer predict` writes it (scores.tsv) and the workflow
(results/{cell}/{model}/predictions.tsv). `score` is the predicted probability of
interaction; `pair_id` the pair's 0-based data row in the pairs file. Only scored pairs get
a track row.

Outputs (coordinates 0-based, half-open, exactly the pairs file's element coordinates):

- BEDPE: a `#` header line, then per pair by pair_id `chrom1 start1 end1` (enhancer)
  `chrom2 start2 end2` (promoter) `name score strand1 strand2 label probability`.
  `name` is `pair_<pair_id>` (IGV reads an all-numeric name column as the score); `score`
  is `browser_score(probability)`, an integer 0-1000; strands are the pairs file's
  strand1/strand2 where it has them, else `.`; `label` is the scores table's, else the pairs
  file's, `.` where unknown (column 11 is the label, as in the BEDPE that read_pairs reads,
  so the file reads back as pairs); `probability` is the score, written exactly.
- UCSC interact (bed5+13, `INTERACT_FIELDS`, schema `INTERACT_AS`): an optional
  `track type=interact ...` line for direct upload, a `#` header line, then one row per
  pair sorted by chrom and chromStart: chromStart/chromEnd span both elements, `value` is
  the probability, `exp` the track name, `color` shades from grey to red with the
  probability; the enhancer is the source and the promoter the target (directional). A
  trans pair (elements on different chromosomes) is two rows, one on each chromosome
  spanning that chromosome's element, as the format asks.
- bigInteract (.bb), with the chromosome sizes of a genome: made by UCSC `bedToBigBed`
  when it is on PATH, from the interact rows and `INTERACT_AS` (written beside it);
  otherwise a warning gives the command and how to install the tool.

Every file is written atomically (`epiformer.io.files`).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import ELEMENTS, SCORE_FORMAT
from epiformer.data.chromosomes import check_pairs_fit_genome, fai_path, read_chrom_sizes
from epiformer.data.pairs import (
    PAIR_COLUMNS,
    SAMPLE_SHEET_PAIRS,
    fail_at_first_bad_row,
    fail_at_first_bad_value,
    read_pairs,
)
from epiformer.io.files import atomic_write, atomic_write_text

log = logging.getLogger(__name__)

BEDPE_FIELDS = ["chrom1", "start1", "end1", "chrom2", "start2", "end2", "name", "score", "strand1", "strand2"]
BEDPE_EXTRA = ["label", "probability"]
INTERACT_FIELDS = (
    "chrom chromStart chromEnd name score value exp color sourceChrom sourceStart sourceEnd sourceName sourceStrand "
    "targetChrom targetStart targetEnd targetName targetStrand"
).split()  # bed5+13, the order of INTERACT_AS
INTERACT_AS = """table interact
"Interaction between two regions"
    (
    string chrom;        "Chromosome (or contig, scaffold, etc.). For interchromosomal, use 2 records"
    uint chromStart;     "Start position of lower region. For interchromosomal, set to chromStart of this region"
    uint chromEnd;       "End position of upper region. For interchromosomal, set to chromEnd of this region"
    string name;         "Name of item, for display. Usually 'sourceName/targetName' or empty"
    uint score;          "Score from 0-1000."
    double value;        "Strength of interaction or other data value. Typically basis for score"
    string exp;          "Experiment name (metadata for filtering). Use . if not applicable"
    string color;        "Item color. Specified as r,g,b or hexadecimal #RRGGBB or html color name."
    string sourceChrom;  "Chromosome of source region (directional) or lower region."
    uint sourceStart;    "Start position source/lower/this region"
    uint sourceEnd;      "End position in chromosome of source/lower/this region"
    string sourceName;   "Identifier of source/lower/this region"
    string sourceStrand; "Orientation of source/lower/this region: + or -. Use . if not applicable"
    string targetChrom;  "Chromosome of target region (directional) or upper region."
    uint targetStart;    "Start position in chromosome of target/upper/this region"
    uint targetEnd;      "End position in chromosome of target/upper/this region"
    string targetName;   "Identifier of target/upper/this region"
    string targetStrand; "Orientation of target/upper/this region: + or -. Use . if not applicable"
    )
"""
BROWSER_SCORE_MAX = 1000  # BED score range that browsers shade by
LOW_COLOR, HIGH_COLOR = np.array([200, 200, 200]), np.array([178, 24, 43])  # probability 0 and 1
BEDTOBIGBED_INSTALL = "conda install -c bioconda ucsc-bedtobigbed, or UCSC's prebuilt bedToBigBed binary"


class TracksError(ValueError):
    """A scores table, pairs file or genome that cannot make tracks, reported with the file and the fix."""


def browser_score(probability) -> np.ndarray:
    """Integer 0-1000 from probabilities in [0, 1]: round(p x 1000), non-decreasing in p."""
    scaled = np.rint(np.asarray(probability, dtype=np.float64) * BROWSER_SCORE_MAX)
    return np.clip(scaled, 0, BROWSER_SCORE_MAX).astype(np.int64)


def interact_color(probability) -> list[str]:
    """`#RRGGBB` per probability, from LOW_COLOR at 0 to HIGH_COLOR at 1."""
    weight = np.clip(np.asarray(probability, dtype=np.float64), 0, 1)[:, None]
    rgb = np.rint(LOW_COLOR + weight * (HIGH_COLOR - LOW_COLOR)).astype(int)
    return [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb]


def read_scores(path: str | Path) -> pd.DataFrame:
    """The scores table: `pair_id` (int64, unique), `score` (float64 in [0, 1]), `label` (int64) if it has one."""
    path = Path(path)
    if not path.is_file():
        raise TracksError(
            f"Scores file not found: {path}. Give the scores of `epiformer predict` (scores.tsv) or a "
            "workflow predictions.tsv (results/<cell>/<model>/predictions.tsv)."
        )
    try:
        frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise TracksError(f"{path} is empty. Give a scores table with a header (pair_id, score).") from None
    missing = [column for column in ("pair_id", "score") if column not in frame.columns]
    if missing:
        raise TracksError(
            f"{path}, line 1: no {' or '.join(missing)} column (columns: {', '.join(frame.columns)}). Give a "
            "tab-separated table with a header holding pair_id and score, as `epiformer predict` writes."
        )
    frame.attrs.update(path=str(path), header_lines=1, rows_in_file_order=True)
    check = partial(fail_at_first_bad_value, frame, error=TracksError)
    pair_id = pd.to_numeric(frame["pair_id"], errors="coerce")
    check(pair_id.isna() | (pair_id < 0) | (pair_id != pair_id.round()), "pair_id", "a 0-based row")
    frame["pair_id"] = pair_id.astype(np.int64)
    check(frame["pair_id"].duplicated(), "pair_id", "listed once (it repeats)")
    score = pd.to_numeric(frame["score"], errors="coerce")
    check(~score.between(0, 1), "score", "a probability between 0 and 1")
    frame["score"] = score.astype(np.float64)
    if "label" in frame.columns:
        label = frame["label"].str.strip()
        check(~label.isin(["0", "1"]), "label", "0 or 1")
        frame["label"] = label.astype(np.int64)
    return frame[[c for c in ("pair_id", "score", "label") if c in frame.columns]]


def scored_pairs(pairs: pd.DataFrame, scores: pd.DataFrame, scores_path: str | Path) -> pd.DataFrame:
    """The pairs that have a score, by pair_id, with `probability` and `label` (-1: unknown) beside their columns.

    Fails when a scored pair_id is not a pair of the file, or when the two files give a
    pair different labels: either way the scores were made from another pairs file.
    """
    source, fix = pairs.attrs.get("path", "the pairs file"), "Give the pairs file the scores were made from (--pairs)."
    unknown = ~scores["pair_id"].isin(pairs["pair_id"])
    if unknown.any():
        row = int(unknown.to_numpy().nonzero()[0][0])
        raise TracksError(
            f"{scores_path}, line {row + 2}: pair_id {int(scores['pair_id'].iloc[row])} is not a pair of {source}, "
            f"which has {len(pairs)} pairs (pair_id 0 to {len(pairs) - 1}); {int(unknown.sum())} scored pair_id(s) "
            f"in all are not. The scores were made from another pairs file. {fix}"
        )
    kept = [column for column in pairs.columns if column in PAIR_COLUMNS or column in ("strand1", "strand2")]
    merged = pairs[kept].merge(scores.rename(columns={"score": "probability"}), on="pair_id", suffixes=("", "_scored"))
    merged = merged.sort_values("pair_id", kind="stable").reset_index(drop=True)
    merged.attrs.update(pairs.attrs)
    if "label_scored" in merged.columns:
        known = merged["label"].to_numpy() >= 0
        differs = known & (merged["label"].to_numpy() != merged["label_scored"].to_numpy())
        fail_at_first_bad_row(
            merged,
            differs,
            lambda row: (
                f"label {int(merged['label'].iloc[row])} of pair_id {int(merged['pair_id'].iloc[row])}, but "
                f"{scores_path} gives it label {int(merged['label_scored'].iloc[row])}. The scores were made from "
                f"another pairs file. {fix}"
            ),
            error=TracksError,
        )
        merged["label"] = merged.pop("label_scored")
    return merged


def _strands(scored: pd.DataFrame, column: str) -> pd.Series:
    if column not in scored.columns:
        return pd.Series(".", index=scored.index)
    return scored[column].where(scored[column].isin(["+", "-"]), ".")


def bedpe_table(scored: pd.DataFrame) -> pd.DataFrame:
    """BEDPE_FIELDS + BEDPE_EXTRA rows of `scored_pairs` (see the module docstring)."""
    element_columns = [f"{element}_{part}" for element in ELEMENTS for part in ("chrom", "start", "end")]
    table = pd.DataFrame({field: scored[column] for field, column in zip(BEDPE_FIELDS[:6], element_columns)})
    table["name"] = "pair_" + scored["pair_id"].astype(str)
    table["score"] = browser_score(scored["probability"])
    table["strand1"], table["strand2"] = _strands(scored, "strand1"), _strands(scored, "strand2")
    table["label"] = scored["label"].astype(str).where(scored["label"] >= 0, ".")
    table["probability"] = scored["probability"]
    return table


def interact_table(scored: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """INTERACT_FIELDS rows of `scored_pairs`, sorted by chrom and chromStart; a trans pair gives two rows."""
    enhancer, promoter = (
        scored[[f"{element}_{part}" for part in ("chrom", "start", "end")]].to_numpy().T for element in ELEMENTS
    )
    names = "pair_" + scored["pair_id"].astype(str)
    common = pd.DataFrame(
        {
            "name": names,
            "score": browser_score(scored["probability"]),
            "value": scored["probability"],
            "exp": "_".join(experiment.split()) or ".",  # fields are split on whitespace (bedToBigBed, IGV)
            "color": interact_color(scored["probability"]),
            "sourceChrom": enhancer[0],
            "sourceStart": enhancer[1],
            "sourceEnd": enhancer[2],
            "sourceName": "enhancer_" + scored["pair_id"].astype(str),
            "sourceStrand": _strands(scored, "strand1"),
            "targetChrom": promoter[0],
            "targetStart": promoter[1],
            "targetEnd": promoter[2],
            "targetName": "promoter_" + scored["pair_id"].astype(str),
            "targetStrand": _strands(scored, "strand2"),
        }
    )
    cis = (enhancer[0] == promoter[0]).astype(bool)
    # A cis pair spans both elements; a trans pair is a row on each chromosome, spanning that element.
    cis_span = {"chrom": enhancer[0], "chromStart": np.minimum(enhancer[1], promoter[1])}
    cis_span["chromEnd"] = np.maximum(enhancer[2], promoter[2])
    spans = [pd.DataFrame(cis_span).loc[cis]]
    spans += [
        pd.DataFrame({"chrom": e[0], "chromStart": e[1], "chromEnd": e[2]}).loc[~cis] for e in (enhancer, promoter)
    ]
    table = pd.concat([span.join(common) for span in spans], ignore_index=True)[INTERACT_FIELDS]
    table[["chromStart", "chromEnd"]] = table[["chromStart", "chromEnd"]].astype(np.int64)
    return table.sort_values(["chrom", "chromStart", "chromEnd", "name"], kind="stable").reset_index(drop=True)


def track_line(name: str) -> str:
    """A UCSC custom-track line for an interact file: directional arcs, enhancer to promoter."""
    label = name.replace('"', "'")
    return (
        f'track type=interact name="{label}" description="epiformer predicted enhancer-promoter interactions: '
        f'{label}" interactDirectional=true maxHeightPixels=200:100:50 visibility=full'
    )


def table_text(table: pd.DataFrame, header_lines: list[str]) -> str:
    body = table.to_csv(sep="\t", index=False, header=False, float_format=SCORE_FORMAT)
    return "".join(line + "\n" for line in header_lines) + body


def chrom_sizes_for(genome: str | Path) -> tuple[dict[str, int], Path]:
    """Chromosome sizes from a FASTA's `.fai` index (or a .fai / chrom.sizes file itself); and that file."""
    genome = Path(genome)
    index = genome if genome.suffix in (".fai", ".sizes") else fai_path(genome)
    if not index.is_file():
        raise TracksError(
            f"No chromosome sizes for {genome}: {index} not found. Index the FASTA with `samtools faidx {genome}` "
            "(the workflow's index_genome rule makes it too), or give a chrom.sizes file."
        )
    return read_chrom_sizes(index), index


def big_interact_paths(interact_path: str | Path) -> tuple[Path, Path]:
    """`X.interact.bed` -> (`X.interact.bb`, `X.interact.as`) beside it."""
    interact_path = Path(interact_path)
    stem = interact_path.name.removesuffix(".bed")
    return interact_path.with_name(f"{stem}.bb"), interact_path.with_name(f"{stem}.as")


def write_big_interact(
    interact: pd.DataFrame, sizes: dict[str, int], sizes_path: Path, interact_path: str | Path
) -> Path | None:
    """bigInteract beside `interact_path` with UCSC bedToBigBed, or None (with a warning) when it is not on PATH.

    The autoSql schema is written beside it in either case, for the command the warning gives
    (`sizes_path`: the .fai or chrom.sizes file `sizes` were read from).
    """
    bb_path, as_path = big_interact_paths(interact_path)
    atomic_write_text(as_path, INTERACT_AS)
    tool = shutil.which("bedToBigBed")
    if tool is None:
        sizes_arg, interact_arg, as_arg, bb_arg = (
            shlex.quote(str(p)) for p in (sizes_path, interact_path, as_path, bb_path)
        )
        command = (
            f"cut -f1,2 {sizes_arg} > chrom.sizes && grep -v -e '^track' -e '^#' {interact_arg} "
            f"| sort -k1,1 -k2,2n > interact.sorted.bed && bedToBigBed -as={as_arg} -type=bed5+13 "
            f"interact.sorted.bed chrom.sizes {bb_arg}"
        )
        log.warning(
            "bigInteract skipped: UCSC bedToBigBed is not on PATH. Install it (%s) and run again, or make it "
            "by hand: %s",
            BEDTOBIGBED_INSTALL,
            command,
        )
        return None
    with tempfile.TemporaryDirectory(dir=bb_path.parent, prefix=".bigInteract-") as folder:
        bed, chrom_sizes = Path(folder) / "interact.bed", Path(folder) / "chrom.sizes"
        bed.write_text(table_text(interact, []))  # sorted by chrom (byte order) and start, as bedToBigBed needs
        chrom_sizes.write_text("".join(f"{chrom}\t{size}\n" for chrom, size in sizes.items()))

        def convert(temporary: Path) -> None:
            run = subprocess.run(
                [tool, f"-as={as_path}", "-type=bed5+13", str(bed), str(chrom_sizes), str(temporary)],
                capture_output=True,
                text=True,
            )
            if run.returncode != 0:
                raise TracksError(f"bedToBigBed failed making {bb_path}: {run.stderr.strip()[-1000:]}")

        atomic_write(bb_path, convert)
    log.info("Wrote bigInteract %s (schema %s)", bb_path, as_path)
    return bb_path


def write_tracks(
    pairs_path: str | Path,
    scores_path: str | Path,
    bedpe_path: str | Path,
    interact_path: str | Path,
    genome: str | Path | None = None,
    track_name: str = "epiformer",
    with_track_line: bool = True,
    pairs_named_in: str = SAMPLE_SHEET_PAIRS,
) -> dict:
    """Write the BEDPE and interact tracks of the scored pairs (and bigInteract with a `genome`).

    `genome` (a FASTA with its .fai, or a .fai / chrom.sizes file) checks every element lies
    within its chromosome and gives bedToBigBed its sizes. Nothing is written unless every
    check passes. Returns the counts (pairs, scored, trans) and the paths written.
    `pairs_named_in`: where the pairs file was given (the command line's `--pairs`), for a missing file.
    """
    pairs = read_pairs(pairs_path, require_label=False, named_in=pairs_named_in)
    scores = read_scores(scores_path)
    scored = scored_pairs(pairs, scores, scores_path)
    sizes = None
    if genome is not None:
        sizes, sizes_path = chrom_sizes_for(genome)
        check_pairs_fit_genome(scored, sizes, str(sizes_path))
    trans = int((scored["enhancer_chrom"] != scored["promoter_chrom"]).sum())
    interact = interact_table(scored, track_name)
    bedpe_header = "#" + "\t".join(BEDPE_FIELDS + BEDPE_EXTRA)
    interact_header = [track_line(track_name)] if with_track_line else []
    atomic_write_text(bedpe_path, table_text(bedpe_table(scored), [bedpe_header]))
    atomic_write_text(interact_path, table_text(interact, [*interact_header, "#" + "\t".join(INTERACT_FIELDS)]))
    log.info("%d of %d pairs scored -> %s, %s", len(scored), len(pairs), bedpe_path, interact_path)
    if trans:
        log.info("%d trans pair(s) (elements on two chromosomes): two interact rows each, one per chromosome", trans)
    if scored.empty:
        log.warning("%s scores no pair: the tracks hold headers only", scores_path)
    written = {"bedpe": str(bedpe_path), "interact": str(interact_path)}
    if sizes is None:
        log.info("No genome given: bigInteract not made (it needs chromosome sizes; give --genome)")
    elif scored.empty:
        log.info("bigInteract not made: no pair to write")
    else:
        bb_path = write_big_interact(interact, sizes, sizes_path, interact_path)
        if bb_path is not None:
            written["big_interact"] = str(bb_path)
    return {"pairs": len(pairs), "scored": len(scored), "trans": trans, **written}
