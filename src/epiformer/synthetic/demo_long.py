"""An insulated long-range demo: whether partners interact depends on what lies between them.

Everything is drawn from one seed, so the same seed gives byte-identical files. The genome,
elements and planted element motifs are made with the helpers of `epiformer.synthetic.demo`; what is
new is the layout, the insulators and the labels.

Layout: one *locus* per pair. A locus holds one enhancer and one promoter whose centres lie
`distance` bp apart (log-uniform in [min_distance, max_distance], the enhancer left or right
with probability 0.5), with `LOCUS_PAD` bp beyond each centre; loci do not overlap and lie in
N-free sequence of chromosomes made by `demo.random_chromosome` (isochores, soft-masking, N
telomeres and one interior gap). Each element therefore appears in one pair only, so no
element's sequence can stand in for the insulation of its pairs.

Classes (drawn per pair, independently of everything else):
- *partners* (`partner_fraction`): the two primary motifs form a pair of `GRAMMAR`;
- *hard* (`hard_fraction`): both elements active (their motif is in some grammar pair), not partners;
- *easy* (the rest): both elements inactive.
Insulation is drawn for every pair with probability `insulated_fraction`, whatever its class,
distance or motifs: an insulated pair has a cluster of `insulator_sites` strong, near-consensus
CTCF sites (JASPAR MA0139.1, each scoring at least `STRONG_BITS` log2-odds against a uniform
background) at a random place between the two centres, at least `clearance` bp from each.
The true probability is `p_open` for open partners, `p_blocked` for insulated (blocked)
partners and `p_background` for any other pair; the label is one Bernoulli draw from it.

No other CTCF site: after planting, every site elsewhere in the genome that scores at least
`BACKGROUND_BITS` (below `STRONG_BITS`) is broken by substitutions, each at its most
informative position unless that would strengthen an overlapping site to that strength, so
the open spans hold no CTCF site of that strength at all. Element motif pools leave CTCF out
(demo.py's grammars use it for elements) so that no element looks like an insulator.

Ceiling: a model that sees the two element windows (and the distance, which carries nothing
about insulation here) can at best learn E[p | elements]: the mixture
`(1 - q) p_open + q p_blocked` for partners and `p_background` otherwise. `element_only_ceiling`
gives the AUROC of that score and of the oracle (p itself) exactly, from the class weights;
`generate_long_demo` writes both, and the same on the written pairs, to `{cell}.ceiling.json`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from epiformer.constants import ALPHABET
from epiformer.sequence.motifs import Motif, bundled_jaspar_path, read_jaspar, reverse_complement, sample_site
from epiformer.synthetic.demo import Element, plant_sites, random_chromosome, write_fasta, write_targetfinder

# No CTCF among the element motifs: CTCF sites mean insulator here and nothing else.
GRAMMAR = frozenset({("GATA1", "SP1"), ("GATA1", "YY1"), ("SPI1", "ELK1")})
ACTIVE_ENHANCERS, INACTIVE_ENHANCERS = ("GATA1", "SPI1"), ("FOXA1", "HNF4A")
ACTIVE_PROMOTERS, INACTIVE_PROMOTERS = ("SP1", "YY1", "ELK1"), ("NRF1", "ZNF143")
ENHANCER_WIDTHS, PROMOTER_WIDTHS = (150, 400), (150, 300)  # as demo.generate_demo draws them
LOCUS_PAD = 2_000  # bp from each element centre to its locus edge
STRONG_BITS = 20.0  # every planted insulator site scores at least this (CTCF's best is 26.1)
BACKGROUND_BITS = 16.0  # no other site in the genome scores this much
# How far from its centre an element window of config/config.yaml reaches: 256 bp wide plus an 8 bp flank.
DEMO_REACH = 256 // 2 + 8
SITE_GAPS = (5, 30)  # bp between neighbouring sites of a cluster
INSULATOR_SHARPNESS = 4.0  # insulator sites sit closer to the consensus than element sites (2.0)


@dataclass(frozen=True)
class LongDemoSpec:
    """Sizes and probabilities of the long-range demo; the defaults give 1,200 pairs on ~25 Mb.

    The genome is as long as its loci need (the sum of the pairs' spans plus pads, N runs and
    slack), since each pair owns its span.
    """

    seed: int = 11
    cell: str = "demo_long"
    n_chromosomes: int = 4
    pairs: int = 1200
    min_distance: int = 3_000
    max_distance: int = 50_000
    partner_fraction: float = 0.5
    hard_fraction: float = 0.2
    insulated_fraction: float = 0.5
    insulator_sites: int = 4
    clearance: int = 1_000  # bp from each element centre kept free of insulator sites
    p_open: float = 0.9
    p_blocked: float = 0.05
    p_background: float = 0.03

    def __post_init__(self):
        fractions = (self.partner_fraction, self.hard_fraction, self.insulated_fraction)
        if not all(0 <= f <= 1 for f in fractions) or self.partner_fraction + self.hard_fraction > 1:
            raise ValueError(f"LongDemoSpec: fractions must lie in [0, 1] with partner + hard <= 1, got {fractions}")
        if self.clearance <= DEMO_REACH:
            raise ValueError(f"LongDemoSpec: clearance {self.clearance} must exceed the demo windows' {DEMO_REACH} bp")
        if self.min_distance < 2 * self.clearance + max_cluster_width(self.insulator_sites):
            raise ValueError(
                f"LongDemoSpec: min_distance {self.min_distance} leaves no room for an insulator: make it at least "
                f"2 x clearance + {max_cluster_width(self.insulator_sites)} bp"
            )
        if self.min_distance >= self.max_distance:
            raise ValueError(f"LongDemoSpec: min_distance {self.min_distance} must be below max_distance")


def max_cluster_width(sites: int) -> int:
    return sites * 19 + (sites - 1) * (SITE_GAPS[1] - 1)  # CTCF MA0139.1 is 19 bp wide


def ctcf_log_odds(motif: Motif) -> np.ndarray:
    """[W, 5] log2-odds against a uniform background, channels A, C, G, T, and N (never a site)."""
    return np.c_[np.log2(motif.probabilities / 0.25), np.full(motif.width, -1e3)]


CODES = np.full(256, 4, dtype=np.int8)
for _code, _base in enumerate(ALPHABET.encode()):
    CODES[_base] = CODES[_base + 32] = _code


def site_scores(sequence: bytes | bytearray, log_odds: np.ndarray) -> np.ndarray:
    """The best of both strands' score for the site starting at each position, [len - W + 1] float32."""
    codes = CODES[np.frombuffer(bytes(sequence), np.uint8)]
    width = log_odds.shape[0]
    reverse = np.c_[log_odds[::-1, 3::-1], log_odds[::-1, 4]]  # reverse complement: positions and A<->T, C<->G
    n = len(codes) - width + 1
    forward_score, reverse_score = np.zeros(max(n, 0), np.float32), np.zeros(max(n, 0), np.float32)
    for k in range(width):
        forward_score += log_odds[k, codes[k : k + n]]
        reverse_score += reverse[k, codes[k : k + n]]
    return np.maximum(forward_score, reverse_score)


def draw_loci(spec: LongDemoSpec, rng: np.random.Generator) -> list[dict]:
    """Class, insulation, distance, orientation and motifs of each pair, all independent of one another."""
    loci = []
    for _ in range(spec.pairs):
        draw = rng.random()
        kind = "partners" if draw < spec.partner_fraction else "hard"
        kind = "easy" if draw >= spec.partner_fraction + spec.hard_fraction else kind
        if kind == "partners":
            motifs = sorted(GRAMMAR)[int(rng.integers(len(GRAMMAR)))]
        elif kind == "hard":
            options = [(e, p) for e in ACTIVE_ENHANCERS for p in ACTIVE_PROMOTERS if (e, p) not in GRAMMAR]
            motifs = options[int(rng.integers(len(options)))]
        else:
            motifs = (str(rng.choice(INACTIVE_ENHANCERS)), str(rng.choice(INACTIVE_PROMOTERS)))
        distance = round(math.exp(rng.uniform(math.log(spec.min_distance), math.log(spec.max_distance))))
        loci.append(
            {
                "kind": kind,
                "insulated": bool(rng.random() < spec.insulated_fraction),
                "distance": int(distance),
                "enhancer_first": bool(rng.random() < 0.5),
                "motifs": motifs,
                "widths": (int(rng.integers(*ENHANCER_WIDTHS)), int(rng.integers(*PROMOTER_WIDTHS))),
            }
        )
    return loci


def n_free_segments(sequence: bytearray) -> list[tuple[int, int]]:
    is_n = np.frombuffer(bytes(sequence).upper(), np.uint8) == ord("N")
    edges = np.flatnonzero(np.diff(np.r_[1, is_n.view(np.int8), 1]))  # starts and ends of N-free runs
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]


def lay_out(loci: list[dict], spec: LongDemoSpec, rng) -> dict[str, bytearray]:
    """Chromosomes long enough for their loci; sets each locus's `chrom` and left element centre `left`."""
    chroms = rng.permutation(np.arange(len(loci)) % spec.n_chromosomes)
    genome = {}
    for c in range(spec.n_chromosomes):
        mine = [locus for locus, chrom in zip(loci, chroms) if chrom == c]
        sizes = [2 * LOCUS_PAD + locus["distance"] for locus in mine]
        name = f"chr{c + 1}"
        genome[name] = random_chromosome(sum(sizes) + 70_000 + 2 * (2 * LOCUS_PAD + spec.max_distance), rng)
        segments, segment = n_free_segments(genome[name]), 0
        cursor = segments[0][0]
        for locus, size in zip(mine, sizes):
            while cursor + size > segments[segment][1]:
                segment += 1
                if segment == len(segments):
                    raise RuntimeError(f"{name}: the loci did not fit; raise the chromosome slack in lay_out")
                cursor = segments[segment][0]
            locus["chrom"], locus["left"] = name, cursor + LOCUS_PAD
            cursor += size
    return genome


def locus_elements(locus: dict) -> tuple[Element, Element]:
    """The enhancer and promoter of a locus, each [centre - width // 2, + width)."""
    centres = (locus["left"], locus["left"] + locus["distance"])
    if not locus["enhancer_first"]:
        centres = centres[::-1]
    elements = []
    for centre, width, motif in zip(centres, locus["widths"], locus["motifs"]):
        elements.append(Element(locus["chrom"], centre - width // 2, centre - width // 2 + width, motif, None))
    return elements[0], elements[1]


def plant_insulator(genome, locus: dict, motif: Motif, log_odds: np.ndarray, spec: LongDemoSpec, rng) -> None:
    """A cluster of strong CTCF sites (random strands) at a random place at least `clearance` from both centres."""
    sites = []
    while len(sites) < spec.insulator_sites:
        site = sample_site(motif, rng, sharpness=INSULATOR_SHARPNESS)
        if site_scores(site.encode(), log_odds)[0] >= STRONG_BITS:
            sites.append(reverse_complement(site) if rng.random() < 0.5 else site)
    gaps = rng.integers(*SITE_GAPS, len(sites) - 1)
    spacers = ["".join(ALPHABET[b] for b in rng.integers(0, 4, int(g))) for g in gaps] + [""]
    cluster = "".join(site + spacer for site, spacer in zip(sites, spacers))
    lowest = locus["left"] + spec.clearance
    highest = locus["left"] + locus["distance"] - spec.clearance - len(cluster)
    start = int(rng.integers(lowest, highest + 1))
    genome[locus["chrom"]][start : start + len(cluster)] = cluster.encode()
    locus["insulator"] = (start, start + len(cluster))


def break_background_sites(genome: dict[str, bytearray], loci: list[dict], log_odds: np.ndarray) -> int:
    """Break every CTCF site scoring >= BACKGROUND_BITS that is not inside an insulator; returns how many."""
    width, broken = log_odds.shape[0], 0
    for chrom, sequence in genome.items():
        kept = [locus["insulator"] for locus in loci if locus["chrom"] == chrom and locus["insulated"]]
        for _ in range(10):
            hits = np.flatnonzero(site_scores(sequence, log_odds) >= BACKGROUND_BITS)
            hits = [int(i) for i in hits if not any(s <= i <= e - width for s, e in kept)]
            for start in hits:
                protected = np.array([any(s <= start + k < e for s, e in kept) for k in range(width)])
                break_site(sequence, start, log_odds, protected)
            broken += len(hits)
            if not hits:
                break
        else:
            raise RuntimeError(f"{chrom}: background CTCF sites kept reappearing")
    return broken


def break_site(sequence: bytearray, start: int, log_odds: np.ndarray, protected: np.ndarray) -> None:
    """On each strand where the site scores >= BACKGROUND_BITS, make the one substitution that lowers it most, never
    at a `protected` position (a planted insulator base) and never one that `strengthens_a_site`; case is kept.

    Judging a substitution by this site alone could undo the one that broke an overlapping site on the other strand,
    and that site's substitution then undid this one, pass after pass. With no substitution left (no spec tried so far)
    the site stays, and break_background_sites gives up after its passes.
    """
    width = log_odds.shape[0]
    reverse = np.c_[log_odds[::-1, 3::-1], log_odds[::-1, 4]]
    codes = CODES[np.frombuffer(bytes(sequence[start : start + width]), np.uint8)]
    for matrix in (log_odds, reverse):
        contribution = matrix[np.arange(width), codes]
        if contribution.sum() < BACKGROUND_BITS:
            continue
        for k, code in substitutions(matrix, contribution, protected):
            if not strengthens_a_site(sequence, start + k, code, log_odds):
                base = ALPHABET[code]
                sequence[start + k] = ord(base.lower() if chr(sequence[start + k]).islower() else base)
                codes[k] = code
                break


def substitutions(matrix: np.ndarray, contribution: np.ndarray, protected: np.ndarray) -> list[tuple[int, int]]:
    """(position, base code) of every substitution at an unprotected position that lowers one strand's site (its
    [W, 5] `matrix`, its bases' `contribution`), the largest drop first.

    Ties go in the order of (position, base), so the first is the most informative position's least-adding base,
    the only substitution tried before overlapping sites were looked at: the default demo's bytes stay as they were.
    """
    drop = np.where(protected[:, None], -np.inf, contribution[:, None] - matrix[:, :4])  # [W, 4]
    order = np.argsort(-drop, axis=None, kind="stable")
    return [divmod(int(i), 4) for i in order if drop.flat[i] > 0]


def strengthens_a_site(sequence: bytearray, position: int, code: int, log_odds: np.ndarray) -> bool:
    """Whether base `code` at `position` leaves a site covering it (any start, either strand) scoring
    >= BACKGROUND_BITS and higher than before: a site made or kept that break_background_sites would break again.

    Covering sites of an unprotected position are never an insulator's own, which lie wholly inside it.
    """
    first = max(0, position - log_odds.shape[0] + 1)
    window = bytearray(sequence[first : position + log_odds.shape[0]])  # every site that covers `position`
    before = site_scores(window, log_odds)
    window[position - first] = ord(ALPHABET[code])
    after = site_scores(window, log_odds)
    return bool(np.any((after >= BACKGROUND_BITS) & (after > before)))


def class_probabilities(spec: LongDemoSpec) -> list[tuple[str, bool, float, float, float]]:
    """(class, insulated, weight, true p, E[p | elements]) of each of the six classes of pair."""
    q = spec.insulated_fraction
    mixture = (1 - q) * spec.p_open + q * spec.p_blocked
    weights = {"partners": spec.partner_fraction, "hard": spec.hard_fraction}
    weights["easy"] = 1 - spec.partner_fraction - spec.hard_fraction
    rows = []
    for kind, weight in weights.items():
        for insulated in (False, True):
            p = (spec.p_blocked if insulated else spec.p_open) if kind == "partners" else spec.p_background
            seen = mixture if kind == "partners" else spec.p_background
            rows.append((kind, insulated, weight * (q if insulated else 1 - q), p, seen))
    return rows


def weighted_auroc(positives: np.ndarray, negatives: np.ndarray, scores: np.ndarray) -> float:
    """AUROC of a score that takes one value per class, from each class's positive and negative mass (ties half)."""
    above = (scores[:, None] > scores[None, :]) + 0.5 * (scores[:, None] == scores[None, :])  # (positive, negative)
    return float(positives @ above @ negatives / (positives.sum() * negatives.sum()))


def element_only_ceiling(spec: LongDemoSpec) -> dict[str, float]:
    """Population oracle AUROC (labels vs p), element-only ceiling (labels vs E[p | elements]) and class shares.

    Exact, from the class weights and probabilities, for an infinite draw of `spec`'s pairs.
    """
    classes = class_probabilities(spec)
    weight, p, seen = (np.array([row[k] for row in classes]) for k in (2, 3, 4))
    positives, negatives = weight * p, weight * (1 - p)
    blocked = np.array([kind == "partners" and insulated for kind, insulated, *_ in classes])
    both_active = np.array([kind != "easy" for kind, *_ in classes])
    return {
        "oracle_auroc": weighted_auroc(positives, negatives, p),
        "element_only_auroc": weighted_auroc(positives, negatives, seen),
        "positive_rate": float(positives.sum()),
        "insulated_share_of_hard_negatives": float(negatives[blocked].sum() / negatives[both_active].sum()),
    }


def sample_ceiling(loci: list[dict]) -> dict[str, float]:
    """`element_only_ceiling`'s figures on the written pairs: their labels, p and p_elements."""
    labels = np.array([locus["label"] for locus in loci])
    p = np.array([locus["p"] for locus in loci])
    blocked = np.array([locus["kind"] == "partners" and locus["insulated"] for locus in loci])
    hard_negative = np.array([locus["kind"] != "easy" for locus in loci]) & (labels == 0)
    return {
        "oracle_auroc": float(roc_auc_score(labels, p)),
        "element_only_auroc": float(roc_auc_score(labels, [locus["p_elements"] for locus in loci])),
        "positive_rate": float(labels.mean()),
        "insulated_share_of_hard_negatives": float((blocked & hard_negative).sum() / hard_negative.sum()),
    }


def draw_labels(loci: list[dict], spec: LongDemoSpec, rng) -> None:
    """Set each locus's true probability `p`, what its elements tell `p_elements`, and `label` ~ Bernoulli(p)."""
    lookup = {(kind, insulated): (p, seen) for kind, insulated, _, p, seen in class_probabilities(spec)}
    for locus in loci:
        locus["p"], locus["p_elements"] = lookup[(locus["kind"], locus["insulated"])]
        locus["label"] = int(rng.random() < locus["p"])


def write_truth(loci: list[dict], path: Path) -> None:
    """pair_id, label, p_interact, p_elements, class, insulated, motifs, distance, insulator (start, end or '.')."""
    columns = ["pair_id", "label", "p_interact", "p_elements", "pair_class", "insulated"]
    columns += ["enhancer_motifs", "promoter_motifs", "distance", "insulator_start", "insulator_end"]
    with open(path, "w") as handle:
        handle.write("\t".join(columns) + "\n")
        for pair_id, locus in enumerate(loci):
            insulator = locus["insulator"] if locus["insulated"] else (".", ".")
            fields = [pair_id, locus["label"], locus["p"], locus["p_elements"], locus["kind"], int(locus["insulated"])]
            fields += [*locus["motifs"], locus["distance"], *insulator]
            handle.write("\t".join(map(str, fields)) + "\n")


def generate_long_demo(outdir: str | Path, spec: LongDemoSpec = LongDemoSpec()) -> dict[str, Path]:
    """Write genome.fa, `{cell}.pairs.csv` (TargetFinder CSV), `{cell}.truth.tsv` and `{cell}.ceiling.json`.

    Pairs are in genome order (chromosome, then position); pair_id is the row number in
    both tables. Returns the paths by name: genome, {cell}, {cell}_truth, {cell}_ceiling.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    motifs = read_jaspar(bundled_jaspar_path())
    log_odds = ctcf_log_odds(motifs["CTCF"])
    loci = draw_loci(spec, rng)
    genome = lay_out(loci, spec, rng)
    loci.sort(key=lambda locus: (int(locus["chrom"][3:]), locus["left"]))
    elements = [locus_elements(locus) for locus in loci]
    for enhancer, promoter in elements:
        plant_sites(genome, enhancer, motifs, rng)
        plant_sites(genome, promoter, motifs, rng)
    for locus in loci:
        if locus["insulated"]:
            plant_insulator(genome, locus, motifs["CTCF"], log_odds, spec, rng)
    broken = break_background_sites(genome, loci, log_odds)
    draw_labels(loci, spec, rng)
    paths = {"genome": outdir / "genome.fa", spec.cell: outdir / f"{spec.cell}.pairs.csv"}
    paths[f"{spec.cell}_truth"] = outdir / f"{spec.cell}.truth.tsv"
    paths[f"{spec.cell}_ceiling"] = outdir / f"{spec.cell}.ceiling.json"
    write_fasta(genome, paths["genome"])
    rows = [(n, n, locus["distance"], locus["label"], locus["p"]) for n, locus in enumerate(loci)]
    write_targetfinder(rows, [e for e, _ in elements], [p for _, p in elements], paths[spec.cell])
    write_truth(loci, paths[f"{spec.cell}_truth"])
    ceiling = {
        "population": element_only_ceiling(spec),
        "sample": sample_ceiling(loci),
        "pairs": len(loci),
        "positives": sum(locus["label"] for locus in loci),
        "genome_bp": sum(len(s) for s in genome.values()),
        "background_sites_broken": broken,
        "spec": asdict(spec),
    }
    paths[f"{spec.cell}_ceiling"].write_text(json.dumps(ceiling, indent=2) + "\n")
    return paths
