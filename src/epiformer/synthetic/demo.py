"""The built-in demo: a synthetic genome with real JASPAR motifs planted, and pair tables.

Everything is drawn from one seed, so the same seed gives byte-identical files.

Genome: chromosomes `chr1..chrN` with isochore-like GC variation (100-300 kb segments of
GC 0.36-0.58), N runs at the telomeres and one interior gap per chromosome, and lowercase
(soft-masked) stretches covering about a tenth of the sequence.

Elements: promoters and enhancers at random non-N positions. Each carries one *primary*
motif (six sites, near consensus, random strand) and sometimes one *decoy* site of
another motif, all within `SITE_SPREAD` bp of the element centre so that any window of
at least 2 x SITE_SPREAD + 2 x flank bp contains them. A share `BLANK_RATE` of elements
is *blank*: no planted site, background only (`none` in the truth table).

Labels: each cell line has a *grammar*, a set of partner (enhancer TF, promoter TF) pairs.
An element is *active* in a cell line when its primary motif belongs to some partner pair;
blank elements are never active. A pair's true interaction probability is high when its two
primary motifs are partners, moderate when only a decoy makes them partners, and low
otherwise. Candidates are pairs whose two elements are both active or both inactive, or an
active element with a blank one. Negatives are drawn, from the same log-distance bin as each
positive, in the shares `NEGATIVE_KINDS`: *hard* (both elements active but not partners),
*lone* (the positive's enhancer motif with a blank promoter, or its promoter motif with a
blank enhancer) or *easy* (both inactive). Activity is learnable from one element, but
among active pairs only the combination decides, so a model that scores each element
separately (additive, e.g. k-mer logistic regression) stays well below one that relates
enhancer to promoter; the grammars differ between cell lines, so a model does not transfer.
Distance alone carries no signal.

Lone negatives make a model recognise every partner motif on both elements. Without them
the element types are a short closed list, and hard negatives let a model decide by
exclusion: in `erythroid` a GATA1 enhancer meets only SP1, YY1 (partners) or CTCF (hard)
promoters, so "positive unless the promoter has CTCF" scores as well as recognising SP1 and
YY1, and knocking out a promoter's SP1 sites barely moves such a model's score. A blank
element is what a knockout leaves, and as a lone negative it is labelled so: an active
element's partner must show its own motif.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from epiformer.constants import ALPHABET
from epiformer.sequence.motifs import Motif, bundled_jaspar_path, read_jaspar, reverse_complement, sample_site

SITE_SPREAD = 100


GRAMMARS: dict[str, frozenset[tuple[str, str]]] = {
    # Erythroid: GATA1 enhancers reach SP1 and YY1 promoters; CTCF-CTCF is homotypic bridging.
    "erythroid": frozenset({("GATA1", "SP1"), ("GATA1", "YY1"), ("CTCF", "CTCF")}),
    # Lymphoid: SPI1 enhancers reach ELK1 and CTCF promoters; YY1-YY1 is homotypic bridging.
    "lymphoid": frozenset({("SPI1", "ELK1"), ("SPI1", "CTCF"), ("YY1", "YY1")}),
}
ENHANCER_MOTIFS = ("CTCF", "YY1", "GATA1", "SPI1")
PROMOTER_MOTIFS = ("CTCF", "YY1", "SP1", "ELK1")
PRIMARY_SITES, DECOY_RATE = 6, 0.25
# Share of *blank* elements, with no planted site (background only): inactive in every cell
# line, they are what an element becomes when its motif's sites are knocked out.
BLANK_RATE = 0.1
P_PRIMARY, P_DECOY, P_BACKGROUND = 0.9, 0.4, 0.03
# Shares of the negative kinds: hard pairs two active elements that are not partners (higher
# makes the combination matter more and one element alone less); lone pairs an active element
# with a blank one, so a partner must be recognised by its own motif, not by excluding the
# motifs of non-partners; easy pairs two inactive elements.
NEGATIVE_KINDS = {"hard": 0.55, "lone": 0.3, "easy": 0.15}


@dataclass(frozen=True)
class DemoSpec:
    """Sizes of the demo; the defaults give ~4.8 Mb of genome and 6,000 pairs per cell line."""

    seed: int = 7
    n_chromosomes: int = 6
    chromosome_length: int = 800_000
    positives_per_cell: int = 1500
    negatives_per_positive: int = 3
    min_distance: int = 5_000
    max_distance: int = 400_000
    cells: dict[str, str] = field(default_factory=lambda: {"demo_a": "erythroid", "demo_b": "lymphoid"})
    enhancers_per_mb: int = 625
    promoters_per_mb: int = 415

    def element_counts(self) -> tuple[int, int]:
        megabases = self.n_chromosomes * self.chromosome_length / 1e6
        return round(self.enhancers_per_mb * megabases), round(self.promoters_per_mb * megabases)


@dataclass
class Element:
    """A synthetic enhancer or promoter: where it lies and the motif planted in it (None: blank)."""

    chrom: str
    start: int
    end: int
    primary: str | None  # None: a blank element
    decoy: str | None

    @property
    def center(self) -> int:
        return (self.start + self.end) // 2


def random_chromosome(length: int, rng: np.random.Generator) -> bytearray:
    """One chromosome: isochores of varying GC, N gaps and soft-masked stretches."""
    seq = bytearray(length)
    pos = 0
    while pos < length:
        size = min(int(rng.integers(100_000, 300_000)), length - pos)
        gc = rng.uniform(0.36, 0.58)
        probs = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
        seq[pos : pos + size] = np.frombuffer(ALPHABET.encode(), np.uint8)[rng.choice(4, size, p=probs)].tobytes()
        pos += size
    for _ in range(length // 16_000):  # ~10% soft-masked
        start, size = int(rng.integers(0, length)), int(rng.integers(300, 3_000))
        seq[start : start + size] = seq[start : start + size].lower()
    telomere = int(rng.integers(5_000, 10_000))
    seq[:telomere] = b"N" * telomere
    seq[length - telomere :] = b"N" * telomere
    gap_start, gap_size = int(rng.integers(length // 3, 2 * length // 3)), int(rng.integers(20_000, 50_000))
    seq[gap_start : gap_start + gap_size] = b"N" * gap_size
    return seq


def make_genome(spec: DemoSpec, rng: np.random.Generator) -> dict[str, bytearray]:
    lengths = rng.integers(int(spec.chromosome_length * 0.75), int(spec.chromosome_length * 1.25), spec.n_chromosomes)
    return {f"chr{i + 1}": random_chromosome(int(n), rng) for i, n in enumerate(lengths)}


def place_elements(
    genome: dict[str, bytearray], count: int, widths: tuple[int, int], pool: tuple[str, ...], rng
) -> list[Element]:
    """Put `count` elements at random positions free of N, without overlaps."""
    chroms = list(genome)
    sizes = np.array([len(genome[c]) for c in chroms], dtype=float)
    taken: dict[str, list[tuple[int, int]]] = {c: [] for c in chroms}
    elements: list[Element] = []
    for _attempt in range(100 * count):
        if len(elements) == count:
            return elements
        chrom = chroms[rng.choice(len(chroms), p=sizes / sizes.sum())]
        width = int(rng.integers(*widths))
        start = int(rng.integers(0, len(genome[chrom]) - width))
        margin = (start - SITE_SPREAD - 50, start + width + SITE_SPREAD + 50)
        if b"N" in genome[chrom][max(0, margin[0]) : margin[1]].upper():
            continue
        if any(s < margin[1] and margin[0] < e for s, e in taken[chrom]):
            continue
        taken[chrom].append(margin)
        if rng.random() < BLANK_RATE:
            primary = decoy = None
        else:
            primary = str(rng.choice(pool))
            decoy = str(rng.choice([m for m in pool if m != primary])) if rng.random() < DECOY_RATE else None
        elements.append(Element(chrom, start, start + width, primary, decoy))
    if len(elements) == count:
        return elements
    raise ValueError(f"Could not place {count} elements without overlap: make the demo genome larger.")


def plant_sites(genome: dict[str, bytearray], element: Element, motifs: dict[str, Motif], rng) -> None:
    """Write the primary sites and the decoy site into the genome around the element centre."""
    names = ([element.primary] * PRIMARY_SITES + [element.decoy]) if element.primary else []  # blank: none
    names = [name for name in names if name]
    slots = rng.permutation(2 * SITE_SPREAD // 25 - 1)[: len(names)]
    for name, slot in zip(names, slots):
        site = sample_site(motifs[name], rng, sharpness=2.0)
        if rng.random() < 0.5:
            site = reverse_complement(site)
        start = element.center - SITE_SPREAD + int(slot) * 25
        genome[element.chrom][start : start + len(site)] = site.encode()


def interaction_probability(enhancer: Element, promoter: Element, grammar: frozenset) -> float:
    if (enhancer.primary, promoter.primary) in grammar:
        return P_PRIMARY
    enhancer_set = {enhancer.primary, enhancer.decoy} - {None}
    promoter_set = {promoter.primary, promoter.decoy} - {None}
    if any((e, p) in grammar for e in enhancer_set for p in promoter_set):
        return P_DECOY
    return P_BACKGROUND


def candidate_pairs(enhancers: list[Element], promoters: list[Element], spec: DemoSpec) -> list[tuple[int, int, int]]:
    """All (enhancer index, promoter index, distance) on one chromosome within the distance range."""
    e_chrom = np.array([e.chrom for e in enhancers])
    p_chrom = np.array([p.chrom for p in promoters])
    e_center = np.array([e.center for e in enhancers])
    p_center = np.array([p.center for p in promoters])
    distance = np.abs(e_center[:, None] - p_center[None, :])  # (n_enhancers, n_promoters)
    keep = (e_chrom[:, None] == p_chrom[None, :]) & (distance >= spec.min_distance) & (distance <= spec.max_distance)
    rows, cols = np.nonzero(keep)
    return [(int(i), int(j), int(distance[i, j])) for i, j in zip(rows, cols)]


def pair_kind(enhancer: Element, promoter: Element, grammar: frozenset) -> str:
    """'partners', 'hard' (both active, not partners), 'easy' (both inactive), 'lone' (one
    active, the other blank) or 'mixed' (one active, the other inactive with a motif)."""
    enhancer_active = any(e == enhancer.primary for e, _ in grammar)
    promoter_active = any(p == promoter.primary for _, p in grammar)
    if (enhancer.primary, promoter.primary) in grammar:
        return "partners"
    if enhancer_active and promoter_active:
        return "hard"
    if not (enhancer_active or promoter_active):
        return "easy"
    return "lone" if enhancer.primary is None or promoter.primary is None else "mixed"


def sample_cell_pairs(
    candidates, enhancers, promoters, grammar: frozenset, spec: DemoSpec, rng
) -> list[tuple[int, int, int, int, float]]:
    """Label candidates by the grammar, keep positives and distance-matched negatives, shuffled.

    Pairs of one active element and one inactive element with a motif are left out. Each
    positive gets `spec.negatives_per_positive` negatives from its log-distance bin, each of a
    kind drawn with the probabilities `NEGATIVE_KINDS`. A lone negative mirrors the positive:
    its enhancer's motif with a blank promoter, or its promoter's motif with a blank enhancer
    (side drawn at random, else the other), so that each partner motif is seen beside a blank
    element in proportion to how often it is positive. Where the bin has none of the drawn kind left, the first kind
    in `NEGATIVE_KINDS` order that it still has is taken.
    Returns (enhancer index, promoter index, distance, label, true probability) rows.
    """
    kinds = np.array([pair_kind(enhancers[i], promoters[j], grammar) for i, j, _ in candidates])
    eligible = np.flatnonzero(kinds != "mixed")
    candidates = [candidates[k] for k in eligible]
    kinds = kinds[eligible]
    probs = np.array([interaction_probability(enhancers[i], promoters[j], grammar) for i, j, _ in candidates])
    labels = rng.random(len(probs)) < probs
    bins = np.floor(np.log10([d for _, _, d in candidates]) * 8).astype(int)
    positives = rng.permutation(np.flatnonzero(labels))[: spec.positives_per_cell]

    def motifs(index: int) -> tuple[str | None, str | None]:
        i, j, _ = candidates[index]
        return enhancers[i].primary, promoters[j].primary

    def anchor(index: int) -> str:
        """A lone pair's active element, as side and motif ('' for other kinds)."""
        if kinds[index] != "lone":
            return ""
        enhancer, promoter = motifs(index)
        return f"enhancer:{enhancer}" if promoter is None else f"promoter:{promoter}"

    negatives: dict[tuple[int, str, str], list[int]] = {}
    for index in rng.permutation(np.flatnonzero(~labels & (kinds != "partners"))):
        negatives.setdefault((int(bins[index]), str(kinds[index]), anchor(index)), []).append(int(index))
    names, shares = list(NEGATIVE_KINDS), list(NEGATIVE_KINDS.values())
    chosen = list(positives)
    for index in positives:
        enhancer, promoter = motifs(index)
        mirrors = [f"enhancer:{enhancer}", f"promoter:{promoter}"]
        for _ in range(spec.negatives_per_positive):
            kind = str(rng.choice(names, p=shares))
            keys = [("lone", m) for m in rng.permutation(mirrors)] if kind == "lone" else [(kind, "")]
            for pool in (negatives.get((int(bins[index]), *key)) for key in [*keys, *((k, "") for k in names)]):
                if pool:
                    chosen.append(pool.pop())
                    break
    chosen = rng.permutation(chosen)
    return [(*candidates[k], int(labels[k]), float(probs[k])) for k in chosen]


def write_fasta(genome: dict[str, bytearray], path: Path, line_width: int = 60) -> None:
    with open(path, "wb") as handle:
        for name, seq in genome.items():
            handle.write(f">{name}\n".encode())
            for offset in range(0, len(seq), line_width):
                handle.write(bytes(seq[offset : offset + line_width]) + b"\n")


def element_name(kind: str, index: int) -> str:
    """Names carry no motif: the motifs are the answer, kept in the truth table only."""
    return f"{kind}{index}"


def write_targetfinder(rows, enhancers, promoters, path: Path) -> None:
    columns = [
        "enhancer_chrom",
        "enhancer_start",
        "enhancer_end",
        "enhancer_name",
        "promoter_chrom",
        "promoter_start",
        "promoter_end",
        "promoter_name",
        "enhancer_distance_to_promoter",
        "label",
    ]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for i, j, distance, label, _ in rows:
            e, p = enhancers[i], promoters[j]
            writer.writerow(
                [
                    e.chrom,
                    e.start,
                    e.end,
                    element_name("enh", i),
                    p.chrom,
                    p.start,
                    p.end,
                    element_name("prom", j),
                    distance,
                    label,
                ]
            )


def write_bedpe(rows, enhancers, promoters, path: Path) -> None:
    with open(path, "w") as handle:
        handle.write("#chrom1\tstart1\tend1\tchrom2\tstart2\tend2\tname\tscore\tstrand1\tstrand2\tlabel\n")
        for n, (i, j, _, label, _) in enumerate(rows):
            e, p = enhancers[i], promoters[j]
            fields = [e.chrom, e.start, e.end, p.chrom, p.start, p.end, f"pair{n}", ".", ".", ".", label]
            handle.write("\t".join(map(str, fields)) + "\n")


def write_truth(rows, enhancers, promoters, path: Path) -> None:
    with open(path, "w") as handle:
        handle.write("pair_id\tlabel\tp_interact\tenhancer_motifs\tpromoter_motifs\n")
        for pair_id, (i, j, _, label, prob) in enumerate(rows):
            e, p = enhancers[i], promoters[j]
            motifs = [",".join(m for m in (x.primary or "none", x.decoy) if m) for x in (e, p)]
            handle.write(f"{pair_id}\t{label}\t{prob}\t{motifs[0]}\t{motifs[1]}\n")


def generate_demo(outdir: str | Path, spec: DemoSpec = DemoSpec()) -> dict[str, Path]:
    """Write genome.fa and, per cell line, `{cell}.pairs.csv` (first) or `.bedpe` and `.truth.tsv`.

    The first cell line is written as TargetFinder CSV, the others as BEDPE, so the demo
    exercises both input formats. Returns the written paths by name.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    motifs = read_jaspar(bundled_jaspar_path())
    genome = make_genome(spec, rng)
    n_enhancers, n_promoters = spec.element_counts()
    enhancers = place_elements(genome, n_enhancers, (150, 400), ENHANCER_MOTIFS, rng)
    promoters = place_elements(genome, n_promoters, (150, 300), PROMOTER_MOTIFS, rng)
    for element in enhancers + promoters:
        plant_sites(genome, element, motifs, rng)
    paths = {"genome": outdir / "genome.fa"}
    write_fasta(genome, paths["genome"])
    candidates = candidate_pairs(enhancers, promoters, spec)
    for n, (cell, grammar_name) in enumerate(spec.cells.items()):
        rows = sample_cell_pairs(candidates, enhancers, promoters, GRAMMARS[grammar_name], spec, rng)
        pairs_path = outdir / (f"{cell}.pairs.csv" if n == 0 else f"{cell}.pairs.bedpe")
        (write_targetfinder if n == 0 else write_bedpe)(rows, enhancers, promoters, pairs_path)
        write_truth(rows, enhancers, promoters, outdir / f"{cell}.truth.tsv")
        paths[cell] = pairs_path
        paths[f"{cell}_truth"] = outdir / f"{cell}.truth.tsv"
    return paths
