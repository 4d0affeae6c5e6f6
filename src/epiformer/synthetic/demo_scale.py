"""The demo at real distances: spans of 25 kb to 2 Mb across insulated domains, with a known answer.

Everything is drawn from one seed, so the same seed gives byte-identical files. Element grammar,
motif pools, CTCF scoring and the breaking of background CTCF sites are the long demo's
(`synthetic.demo_long`); what is new is the layout and where the answer lies.

Layout. Each chromosome is cut into *domains* by *boundaries*: clusters of `boundary_sites`
strong CTCF sites (JASPAR MA0139.1, each >= `STRONG_BITS`), the first half on the forward
strand and the rest on the reverse, so that they point at each other (convergent), as at real
domain borders. Domain sizes are log-uniform in `domain_sizes`. Promoters lie along the
chromosomes, each in several pairs (`pairs_per_promoter` on average), so pairs overlap and share
promoters and boundaries as real ones do; each pair has its own enhancer.

A pair. Its class (partners, hard, easy: the long demo's grammar), its centre-to-centre
distance `d` (TargetFinder's GM12878 spans: `SPAN_KNOTS`, log-uniform between neighbouring
quantiles, 23 kb to 1.9 Mb, median 225 kb, a fifth over 500 kb) and whether a boundary lies
between its elements (*insulated*, with probability `insulation(d)`, log-linear from
`insulated_near` at the shortest span to `insulated_far` at the longest: a longer span crosses
a border more often) are drawn independently. The pair is then placed where the layout gives
exactly that: a promoter of fitting motif whose enhancer at distance `d` has (or has not) a
boundary between the two, at least `clearance` bp from each element; a promoter is added where
none fits, so no draw is ever rejected and the drawn distribution is the written one.

Labels. p = `p_open` for partners with no boundary between, `p_blocked` for insulated partners,
`p_background` for any other pair; the label is one Bernoulli draw.

What elements and distance can give. A model that reads the two element windows and the
distance, but not the sequence between, can at best score E[p | class, d]: partners
`(1 - insulation(d)) p_open + insulation(d) p_blocked`, everyone else `p_background`. Its AUROC
(the *elements-and-distance ceiling*) and the oracle's (p itself) are computed for the
population, integrating d over `SPAN_KNOTS` on a fine grid (`scale_ceiling`), and on the written
pairs; both go to `{cell}.ceiling.json`, and the truth table gives each pair's p (`p_interact`)
and its ceiling score (`p_elements`, which the summary scores as `element_ceiling_auroc`).
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from epiformer.constants import ALPHABET
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar, reverse_complement, sample_site
from epiformer.synthetic.demo import Element, plant_sites, random_chromosome, write_fasta, write_targetfinder
from epiformer.synthetic.demo_long import (
    ACTIVE_ENHANCERS,
    ACTIVE_PROMOTERS,
    ENHANCER_WIDTHS,
    GRAMMAR,
    INACTIVE_ENHANCERS,
    INACTIVE_PROMOTERS,
    INSULATOR_SHARPNESS,
    PROMOTER_WIDTHS,
    SITE_GAPS,
    STRONG_BITS,
    break_background_sites,
    ctcf_log_odds,
    n_free_segments,
    site_scores,
)

# Quantiles 0, 2.5, ..., 100% of the span (first window's start to second's end) of TargetFinder's
# GM12878 pairs (data/targetfinder-full/, 44,313 pairs): the distances the demo draws.
SPAN_KNOTS = (
    22682, 32564, 39744, 47277, 54456, 62469, 70238, 78199, 86391, 95448, 104982, 114854, 124440, 133373,
    143537, 153697, 163568, 178611, 194200, 210427, 225449, 240903, 255929, 271442, 286355, 312859, 341855,
    369596, 399081, 427739, 454869, 482668, 511727, 650284, 812578, 975931, 1142960, 1311883, 1495207,
    1679714, 1880236,
)  # fmt: skip
ELEMENT_GAP = 3_000  # bp kept between any two element centres, and between an element and a boundary
CEILING_GRID = 400  # points per knot interval when integrating over distance (AUROC exact to ~1e-5)


@dataclass(frozen=True)
class ScaleDemoSpec:
    """Sizes and probabilities of the demo at real distances; the defaults give 2,400 pairs on ~190 Mb."""

    seed: int = 7
    cell: str = "demo_scale"
    n_chromosomes: int = 8
    chromosome_length: int = 24_000_000
    pairs: int = 2400
    pairs_per_promoter: float = 4.0  # promoters laid out first: pairs / this (more are added where none fits)
    domain_sizes: tuple[int, int] = (150_000, 4_000_000)  # log-uniform; boundaries between domains
    boundary_sites: int = 4  # CTCF sites in a boundary, half on each strand, pointing at each other
    # Population AUROC at these settings (scale_ceiling): oracle 0.932, elements and distance 0.760,
    # elements alone 0.709: the sequence between the elements is worth 0.17 beyond both.
    partner_fraction: float = 0.65
    hard_fraction: float = 0.15
    insulated_near: float = 0.4  # P(a boundary between the elements) at the shortest span
    insulated_far: float = 0.8  # ... and at the longest, log-linear between
    clearance: int = 2_000  # bp from each element centre to the nearest boundary of an insulated pair
    p_open: float = 0.9
    p_blocked: float = 0.05
    p_background: float = 0.03

    def __post_init__(self):
        fractions = (self.partner_fraction, self.hard_fraction, self.insulated_near, self.insulated_far)
        if not all(0 <= f <= 1 for f in fractions) or self.partner_fraction + self.hard_fraction > 1:
            raise ValueError(f"ScaleDemoSpec: fractions must lie in [0, 1] with partner + hard <= 1, got {fractions}")
        low, high = self.domain_sizes
        if not 0 < low < high:
            raise ValueError(f"ScaleDemoSpec: domain_sizes must be (smallest, largest), got {self.domain_sizes}")
        if high < SPAN_KNOTS[-1] + 2 * ELEMENT_GAP:
            raise ValueError(
                f"ScaleDemoSpec: the largest domain ({high:,} bp) must hold the longest span ({SPAN_KNOTS[-1]:,} bp) "
                "with room at both ends, or no open pair could be that long"
            )
        if self.chromosome_length < 2 * high:
            raise ValueError(
                f"ScaleDemoSpec: chromosome_length {self.chromosome_length:,} must be at least 2 x {high:,}"
            )
        if self.clearance < ELEMENT_GAP // 2:
            raise ValueError(f"ScaleDemoSpec: clearance must be at least {ELEMENT_GAP // 2} bp")


def insulation(distance, spec: ScaleDemoSpec):
    """P(a boundary lies between the elements | centre distance), log-linear over SPAN_KNOTS' range."""
    low, high = math.log(SPAN_KNOTS[0]), math.log(SPAN_KNOTS[-1])
    position = (np.log(np.asarray(distance, dtype=float)) - low) / (high - low)
    return spec.insulated_near + (spec.insulated_far - spec.insulated_near) * np.clip(position, 0.0, 1.0)


def draw_distance(rng) -> int:
    """A distance from SPAN_KNOTS: a quantile interval uniformly, then log-uniform within it."""
    interval = int(rng.integers(len(SPAN_KNOTS) - 1))
    low, high = math.log(SPAN_KNOTS[interval]), math.log(SPAN_KNOTS[interval + 1])
    return round(math.exp(rng.uniform(low, high)))


def distance_grid() -> np.ndarray:
    """Distances standing for the SPAN_KNOTS distribution, equally weighted: midpoints in log space of
    CEILING_GRID equal steps of each quantile interval."""
    logs = np.log(np.asarray(SPAN_KNOTS, dtype=float))
    steps = (np.arange(CEILING_GRID) + 0.5) / CEILING_GRID
    return np.exp((logs[:-1, None] + (logs[1:] - logs[:-1])[:, None] * steps[None, :]).ravel())


def class_weights(spec: ScaleDemoSpec) -> dict[str, float]:
    return {
        "partners": spec.partner_fraction,
        "hard": spec.hard_fraction,
        "easy": 1 - spec.partner_fraction - spec.hard_fraction,
    }


def true_probability(kind: str, insulated: bool, spec: ScaleDemoSpec) -> float:
    if kind != "partners":
        return spec.p_background
    return spec.p_blocked if insulated else spec.p_open


def ceiling_score(kind: str, distance, spec: ScaleDemoSpec):
    """E[p | class, distance]: the best a model of the two elements and their distance can score."""
    if kind != "partners":
        return np.full(np.shape(distance), spec.p_background)
    q = insulation(distance, spec)
    return (1 - q) * spec.p_open + q * spec.p_blocked


def mass_auroc(scores: np.ndarray, positives: np.ndarray, negatives: np.ndarray) -> float:
    """AUROC of atoms with a score and a positive and negative mass each (ties count half)."""
    values, inverse = np.unique(scores, return_inverse=True)
    pos = np.bincount(inverse, weights=positives, minlength=len(values))
    neg = np.bincount(inverse, weights=negatives, minlength=len(values))
    below = np.cumsum(neg) - neg  # negative mass scoring lower than each value
    return float((pos * (below + 0.5 * neg)).sum() / (pos.sum() * neg.sum()))


def scale_ceiling(spec: ScaleDemoSpec) -> dict[str, float]:
    """Population AUROC of the oracle (p), of the elements-and-distance ceiling (E[p | class, d]) and of the
    elements alone (E[p | class]), with the positive rate and the share of insulated pairs.

    Over the class weights and, for d, `distance_grid` (SPAN_KNOTS' distribution, exact to its grid).
    """
    grid = distance_grid()
    q = insulation(grid, spec)
    atoms = []  # (oracle score, ceiling score, elements-only score, weight, p)
    for kind, weight in class_weights(spec).items():
        elements_only = float(np.mean(ceiling_score(kind, grid, spec)))
        for insulated, share in ((False, 1 - q), (True, q)):
            p = true_probability(kind, insulated, spec)
            atoms.append((np.full(len(grid), p), ceiling_score(kind, grid, spec), np.full(len(grid), elements_only),
                          weight * share / len(grid), np.full(len(grid), p)))  # fmt: skip
    oracle, ceiling, elements, weight, p = (np.concatenate([a[k] for a in atoms]) for k in range(5))
    positives, negatives = weight * p, weight * (1 - p)
    return {
        "oracle_auroc": mass_auroc(oracle, positives, negatives),
        "elements_and_distance_auroc": mass_auroc(ceiling, positives, negatives),
        "elements_only_auroc": mass_auroc(elements, positives, negatives),
        "positive_rate": float(positives.sum()),
        "insulated_share": float(np.mean(q)),
    }


# --- the layout ---------------------------------------------------------------------------------


@dataclass
class Chromosome:
    """One chromosome's layout: N-free segments, boundary centres (sorted) and element centres (sorted)."""

    name: str
    segments: list[tuple[int, int]]
    boundaries: list[int]
    occupied: list[int]  # element centres and boundary centres: nothing new within ELEMENT_GAP of them

    def n_free(self, start: int, end: int) -> bool:
        index = bisect.bisect_right([s for s, _ in self.segments], start) - 1
        return index >= 0 and end <= self.segments[index][1]

    def free(self, centre: int) -> bool:
        index = bisect.bisect_left(self.occupied, centre)
        near = self.occupied[max(0, index - 1) : index + 1]
        return all(abs(centre - other) >= ELEMENT_GAP for other in near)

    def boundaries_between(self, left: int, right: int) -> list[int]:
        return self.boundaries[bisect.bisect_right(self.boundaries, left) : bisect.bisect_left(self.boundaries, right)]

    def domains(self) -> list[tuple[int, int]]:
        """(start, end) of the stretches between neighbouring boundaries (and the chromosome's N-free ends)."""
        edges = [self.segments[0][0], *self.boundaries, self.segments[-1][1]]
        return list(zip(edges[:-1], edges[1:]))

    def occupy(self, centre: int) -> None:
        bisect.insort(self.occupied, centre)


def lay_boundaries(name: str, sequence: bytearray, spec: ScaleDemoSpec, rng) -> Chromosome:
    """Domain borders along one chromosome: log-uniform domain sizes, each border in N-free sequence."""
    segments = n_free_segments(sequence)
    chromosome = Chromosome(name, segments, [], [])
    low, high = (math.log(size) for size in spec.domain_sizes)
    position = segments[0][0] + round(math.exp(rng.uniform(low, high)) * rng.random())  # a random phase
    while position < segments[-1][1] - ELEMENT_GAP:
        if chromosome.n_free(position - ELEMENT_GAP, position + ELEMENT_GAP):
            chromosome.boundaries.append(position)
            chromosome.occupy(position)
        position += round(math.exp(rng.uniform(low, high)))
    return chromosome


def promoter_motif(kind: str, rng) -> str:
    """A primary motif for a new promoter that pairs of `kind` can use."""
    return str(rng.choice(INACTIVE_PROMOTERS if kind == "easy" else ACTIVE_PROMOTERS))


def fits(kind: str, motif: str) -> bool:
    """Whether a promoter of `motif` can be in a pair of `kind`."""
    return (motif in INACTIVE_PROMOTERS) == (kind == "easy")


def enhancer_motif(kind: str, promoter: str, rng) -> str:
    """The enhancer motif that makes (enhancer, promoter) a pair of `kind`."""
    if kind == "easy":
        return str(rng.choice(INACTIVE_ENHANCERS))
    options = [e for e in ACTIVE_ENHANCERS if ((e, promoter) in GRAMMAR) == (kind == "partners")]
    return str(rng.choice(options))


def placement_ok(chromosome: Chromosome, promoter: int, enhancer: int, insulated: bool, spec: ScaleDemoSpec) -> bool:
    """Whether an enhancer centred at `enhancer` fits beside `promoter` with the insulation asked for."""
    reach = max(ENHANCER_WIDTHS[1], PROMOTER_WIDTHS[1])
    if not (chromosome.n_free(enhancer - reach, enhancer + reach) and chromosome.free(enhancer)):
        return False
    left, right = sorted((promoter, enhancer))
    between = chromosome.boundaries_between(left - spec.clearance, right + spec.clearance)
    if any(b < left + spec.clearance or b > right - spec.clearance for b in between):
        return False  # a boundary too close to an element: neither clearly between nor outside
    return bool(between) == insulated


def new_promoter(chromosome: Chromosome, distance: int, insulated: bool, spec, rng, tries: int = 10_000):
    """(centre, enhancer centre) of a new promoter on `chromosome` whose enhancer at `distance` fits."""
    for _ in range(tries):
        direction = 1 if rng.random() < 0.5 else -1
        if insulated:  # straddle a boundary: it lies clearance or more from both elements
            if not chromosome.boundaries:
                continue
            border = chromosome.boundaries[int(rng.integers(len(chromosome.boundaries)))]
            promoter = border - direction * int(rng.integers(spec.clearance, distance - spec.clearance + 1))
        else:  # inside a domain that holds the whole span
            domains = [(a, b) for a, b in chromosome.domains() if b - a > distance + 2 * ELEMENT_GAP]
            if not domains:
                continue
            first, last = domains[int(rng.integers(len(domains)))]
            promoter = int(rng.integers(first + ELEMENT_GAP, last - ELEMENT_GAP - distance + 1))
            promoter = promoter if direction > 0 else promoter + distance
        enhancer = promoter + direction * distance
        if chromosome.n_free(promoter - ELEMENT_GAP, promoter + ELEMENT_GAP) and chromosome.free(promoter):
            if placement_ok(chromosome, promoter, enhancer, insulated, spec):
                return promoter, enhancer
    raise RuntimeError(
        f"No place found on {chromosome.name} for a pair {distance:,} bp apart (insulated: {insulated}) in {tries:,} "
        "tries: make the "
        "chromosomes (demo_scale.chromosome_length) or the largest domain (demo_scale.domain_sizes) larger"
    )


def place_pairs(chromosomes: list[Chromosome], spec: ScaleDemoSpec, rng) -> tuple[list[dict], list[dict]]:
    """Promoters and pairs: each pair's class, distance and insulation drawn, then placed (module docstring).

    Pairs and the first promoters are shared out evenly among the chromosomes, so that a split by
    chromosome gets its share of both.
    """
    promoters = []
    for number in range(round(spec.pairs / spec.pairs_per_promoter)):
        kind = "easy" if rng.random() >= spec.partner_fraction + spec.hard_fraction else "partners"
        c = number % len(chromosomes)
        for _ in range(1000):
            segments = chromosomes[c].segments
            centre = int(rng.integers(segments[0][0] + ELEMENT_GAP, segments[-1][1] - ELEMENT_GAP))
            if chromosomes[c].n_free(centre - ELEMENT_GAP, centre + ELEMENT_GAP) and chromosomes[c].free(centre):
                chromosomes[c].occupy(centre)
                promoters.append({"chrom": c, "centre": centre, "motif": promoter_motif(kind, rng)})
                break
    weights = class_weights(spec)
    pairs = []
    for c in rng.permutation(np.arange(spec.pairs) % len(chromosomes)):
        chromosome = chromosomes[int(c)]
        kind = str(rng.choice(list(weights), p=list(weights.values())))
        distance = draw_distance(rng)
        insulated = bool(rng.random() < insulation(distance, spec))
        placed = None
        for index in rng.permutation(len(promoters)):
            promoter = promoters[int(index)]
            if promoter["chrom"] != c or not fits(kind, promoter["motif"]):
                continue
            for direction in rng.permutation([-1, 1]):
                enhancer = promoter["centre"] + int(direction) * distance
                if placement_ok(chromosome, promoter["centre"], enhancer, insulated, spec):
                    placed = (int(index), enhancer)
                    break
            if placed:
                break
        if placed is None:  # no promoter fits: a new one where the pair does
            centre, enhancer = new_promoter(chromosome, distance, insulated, spec, rng)
            chromosome.occupy(centre)
            promoters.append({"chrom": int(c), "centre": centre, "motif": promoter_motif(kind, rng)})
            placed = (len(promoters) - 1, enhancer)
        index, enhancer = placed
        chromosome.occupy(enhancer)
        motif = enhancer_motif(kind, promoters[index]["motif"], rng)
        pairs.append({"kind": kind, "distance": distance, "insulated": insulated, "promoter": index,
                      "enhancer_centre": enhancer, "enhancer_motif": motif})  # fmt: skip
    return promoters, pairs


def boundary_cluster(motif, log_odds: np.ndarray, sites: int, rng) -> str:
    """`sites` strong CTCF sites, the first half forward and the rest reverse (convergent), short spacers between."""
    drawn = []
    while len(drawn) < sites:
        site = sample_site(motif, rng, sharpness=INSULATOR_SHARPNESS)
        if site_scores(site.encode(), log_odds)[0] >= STRONG_BITS:
            drawn.append(site if len(drawn) < sites // 2 else reverse_complement(site))
    gaps = rng.integers(*SITE_GAPS, sites - 1)
    spacers = ["".join(ALPHABET[b] for b in rng.integers(0, 4, int(g))) for g in gaps] + [""]
    return "".join(site + spacer for site, spacer in zip(drawn, spacers))


def element_at(chrom: str, centre: int, widths: tuple[int, int], motif: str, rng) -> Element:
    width = int(rng.integers(*widths))
    return Element(chrom, centre - width // 2, centre - width // 2 + width, motif, None)


def sample_ceiling(pairs: list[dict]) -> dict[str, float]:
    """`scale_ceiling`'s AUROCs on the written pairs: labels against p, the ceiling's score, elements alone."""
    labels = np.array([pair["label"] for pair in pairs])
    return {
        "oracle_auroc": float(roc_auc_score(labels, [pair["p"] for pair in pairs])),
        "elements_and_distance_auroc": float(roc_auc_score(labels, [pair["p_elements"] for pair in pairs])),
        "elements_only_auroc": float(roc_auc_score(labels, [pair["kind"] == "partners" for pair in pairs])),
        "positive_rate": float(labels.mean()),
        "insulated_share": float(np.mean([pair["insulated"] for pair in pairs])),
    }


def span_summary(pairs: list[dict]) -> dict:
    distances = np.array([pair["distance"] for pair in pairs])
    promoters = np.bincount([pair["promoter"] for pair in pairs])
    return {
        "distance_min": int(distances.min()),
        "distance_median": float(np.median(distances)),
        "distance_max": int(distances.max()),
        "share_over_500kb": float((distances > 500_000).mean()),
        "promoters": int((promoters > 0).sum()),
        "pairs_per_promoter_max": int(promoters.max()),
    }


def write_truth(pairs: list[dict], chromosomes: list[Chromosome], path: Path) -> None:
    """pair_id, label, p_interact, p_elements (the elements-and-distance ceiling's score), class, insulated,
    boundaries (how many lie between the elements), motifs, distance."""
    columns = ["pair_id", "label", "p_interact", "p_elements", "pair_class", "insulated", "boundaries"]
    columns += ["enhancer_motifs", "promoter_motifs", "distance"]
    with open(path, "w") as handle:
        handle.write("\t".join(columns) + "\n")
        for pair_id, pair in enumerate(pairs):
            fields = [pair_id, pair["label"], pair["p"], pair["p_elements"], pair["kind"], int(pair["insulated"])]
            fields += [pair["boundaries"], pair["enhancer_motif"], pair["promoter_motif"], pair["distance"]]
            handle.write("\t".join(map(str, fields)) + "\n")


def generate_scale_demo(outdir: str | Path, spec: ScaleDemoSpec = ScaleDemoSpec()) -> dict[str, Path]:
    """Write genome.fa, `{cell}.pairs.csv` (TargetFinder CSV), `{cell}.truth.tsv` and `{cell}.ceiling.json`.

    Pairs are in genome order (chromosome, then the leftmost element); pair_id is the row number in
    both tables. Returns the paths by name: genome, {cell}, {cell}_truth, {cell}_ceiling.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    motifs = read_jaspar(bundled_jaspar_path())
    log_odds = ctcf_log_odds(motifs["CTCF"])
    lengths = rng.integers(int(spec.chromosome_length * 0.9), int(spec.chromosome_length * 1.1), spec.n_chromosomes)
    genome = {f"chr{i + 1}": random_chromosome(int(n), rng) for i, n in enumerate(lengths)}
    chromosomes = [lay_boundaries(name, sequence, spec, rng) for name, sequence in genome.items()]
    promoters, pairs = place_pairs(chromosomes, spec, rng)
    promoter_elements = [
        element_at(chromosomes[p["chrom"]].name, p["centre"], PROMOTER_WIDTHS, p["motif"], rng) for p in promoters
    ]
    for element in promoter_elements:
        plant_sites(genome, element, motifs, rng)
    for pair in pairs:
        promoter = promoter_elements[pair["promoter"]]
        pair["enhancer"] = element_at(
            promoter.chrom, pair["enhancer_centre"], ENHANCER_WIDTHS, pair["enhancer_motif"], rng
        )
        plant_sites(genome, pair["enhancer"], motifs, rng)
    insulators = []
    for chromosome in chromosomes:
        for centre in chromosome.boundaries:
            cluster = boundary_cluster(motifs["CTCF"], log_odds, spec.boundary_sites, rng)
            start = centre - len(cluster) // 2
            genome[chromosome.name][start : start + len(cluster)] = cluster.encode()
            insulators.append({"chrom": chromosome.name, "insulated": True, "insulator": (start, start + len(cluster))})
    broken = break_background_sites(genome, insulators, log_odds)
    for pair in pairs:
        promoter = promoter_elements[pair["promoter"]]
        chromosome = next(c for c in chromosomes if c.name == promoter.chrom)
        left, right = sorted((promoter.center, pair["enhancer"].center))
        pair["boundaries"] = len(chromosome.boundaries_between(left, right))
        if bool(pair["boundaries"]) != pair["insulated"]:
            raise AssertionError("a pair's insulation does not match its layout")  # placement_ok guarantees it
        pair["promoter_motif"] = promoter.primary
        pair["p"] = true_probability(pair["kind"], pair["insulated"], spec)
        pair["p_elements"] = float(ceiling_score(pair["kind"], pair["distance"], spec))
        pair["label"] = int(rng.random() < pair["p"])
    order = sorted(
        range(len(pairs)),
        key=lambda i: (int(promoter_elements[pairs[i]["promoter"]].chrom[3:]),
                       min(promoter_elements[pairs[i]["promoter"]].start, pairs[i]["enhancer"].start), i),
    )  # fmt: skip
    pairs = [pairs[i] for i in order]
    paths = {"genome": outdir / "genome.fa", spec.cell: outdir / f"{spec.cell}.pairs.csv"}
    paths[f"{spec.cell}_truth"] = outdir / f"{spec.cell}.truth.tsv"
    paths[f"{spec.cell}_ceiling"] = outdir / f"{spec.cell}.ceiling.json"
    write_fasta(genome, paths["genome"])
    # Promoter names are shared by the pairs of one promoter: prom{index}, as TargetFinder names its elements.
    rows = [(n, pair["promoter"], pair["distance"], pair["label"], pair["p"]) for n, pair in enumerate(pairs)]
    write_targetfinder(rows, [pair["enhancer"] for pair in pairs], promoter_elements, paths[spec.cell])
    write_truth(pairs, chromosomes, paths[f"{spec.cell}_truth"])
    ceiling = {
        "population": scale_ceiling(spec),
        "sample": sample_ceiling(pairs),
        "spans": span_summary(pairs),
        "pairs": len(pairs),
        "positives": sum(pair["label"] for pair in pairs),
        "boundaries": sum(len(c.boundaries) for c in chromosomes),
        "genome_bp": sum(len(s) for s in genome.values()),
        "background_sites_broken": broken,
        "spec": asdict(spec),
    }
    paths[f"{spec.cell}_ceiling"].write_text(json.dumps(ceiling, indent=2) + "\n")
    return paths
