"""Motifs from attributions: TF-MoDISco patterns, matched to JASPAR (the workflow's `explain` target).

TF-MoDISco (the maintained `modisco-lite`) cuts *seqlets*, short stretches of high
attribution, out of the explained windows (`attributions`), clusters them and aggregates each
cluster into a pattern: its contribution weight matrix (CWM, the mean contributions) and its
position probability matrix (PPM, the mean one-hot). Enhancer and promoter windows are
separate sequences (the shorter padded with empty bases), so no seqlet straddles the two.

Each pattern is trimmed to the positions holding at least `TRIM` of its strongest position's
attribution and compared with every motif of a JASPAR file by Tomtom (`memelite`, Pearson
column scores, both strands). Its q-value is the Benjamini-Hochberg adjustment of its
p-values against all the file's motifs, as Tomtom reports them.

motifs.tsv has one row per pattern, ranked by attribution (1 = most): the sum over the
pattern's seqlets of their absolute contributions, computed as the number of seqlets times the
summed absolute values of the pattern's CWM (`attribution`), so a motif counts by how often
and how strongly it drives scores. `sign` says whether it raises (+) or lowers (-) the
score.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from epiformer.constants import ALPHABET, ELEMENTS
from epiformer.io.files import atomic_write_text
from epiformer.sequence.motifs import Motif

log = logging.getLogger(__name__)
TRIM = 0.3  # keep the span of positions with at least this share of the pattern's peak attribution
COLUMNS = [
    "rank",
    "motif",
    "matrix_id",
    "q_value",
    "p_value",
    "seqlets",
    "sign",
    "attribution",
    "consensus",
    "patterns",
]
Q_VALUE = 0.05  # a pattern whose best JASPAR match has a lower q-value is named after it


@dataclass(frozen=True)
class ModiscoSpec:
    """The `explain.modisco:` config block (config/config.yaml documents each key)."""

    sliding_window_size: int = 15  # bp of the windows scanned for seqlets (about a motif's width)
    flank_size: int = 5  # bp added on each side of a seqlet
    max_seqlets: int = 2000  # per sign (TF-MoDISco's max_seqlets_per_metacluster)
    leiden_runs: int = 4  # clustering restarts (TF-MoDISco's default, 50, takes minutes on CPUs)
    trim_to_window_size: int = (
        20  # bp a pattern is trimmed to (TF-MoDISco's default, 30, spans two sites of a dense element)
    )
    initial_flank_to_add: int = 5  # bp added to each side of a trimmed pattern


@dataclass
class Pattern:
    """A TF-MoDISco pattern: the seqlets it gathers and their mean contributions and base frequencies."""

    sign: str  # "+" raises the score, "-" lowers it
    seqlets: int
    cwm: np.ndarray  # [W, 4] mean contributions
    ppm: np.ndarray  # [W, 4] base frequencies
    attribution: float

    def trimmed(self) -> tuple[np.ndarray, np.ndarray]:
        """CWM and PPM cut to the positions with at least TRIM of the peak attribution."""
        strength = np.abs(self.cwm).sum(axis=1)
        keep = np.flatnonzero(strength >= TRIM * strength.max())
        window = slice(keep.min(), keep.max() + 1)
        return self.cwm[window], self.ppm[window]


def modisco_inputs(onehot: dict[str, np.ndarray], hypothetical: dict[str, np.ndarray]):
    """One-hot and hypothetical contributions [N x elements, W, 4], each element window a row of its own."""
    width = max(onehot[element].shape[1] for element in ELEMENTS)

    def stacked(arrays: dict[str, np.ndarray]) -> np.ndarray:
        rows = [np.pad(arrays[e], ((0, 0), (0, width - arrays[e].shape[1]), (0, 0))) for e in ELEMENTS]
        return np.concatenate(rows).astype(np.float32)

    return stacked(onehot), stacked(hypothetical)


def discover_patterns(onehot: np.ndarray, hypothetical: np.ndarray, spec: ModiscoSpec) -> list[Pattern]:
    """TF-MoDISco's patterns of both signs, most attribution first."""
    from modiscolite.tfmodisco import TFMoDISco

    if not np.any(hypothetical):
        return []  # nothing attributed (TF-MoDISco itself fails on it)
    positive, negative = TFMoDISco(
        one_hot=onehot,
        hypothetical_contribs=hypothetical,
        sliding_window_size=spec.sliding_window_size,
        flank_size=spec.flank_size,
        max_seqlets_per_metacluster=spec.max_seqlets,
        n_leiden_runs=spec.leiden_runs,
        trim_to_window_size=spec.trim_to_window_size,
        initial_flank_to_add=spec.initial_flank_to_add,
    )
    patterns = [
        Pattern(
            sign,
            len(found.seqlets),
            np.asarray(found.contrib_scores),
            np.asarray(found.sequence),
            float(np.abs(found.contrib_scores).sum() * len(found.seqlets)),
        )
        for sign, group in (("+", positive), ("-", negative))
        for found in group or []
    ]
    return sorted(patterns, key=lambda pattern: -pattern.attribution)


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """q-values of the p-values along the last axis (Benjamini-Hochberg, as scipy computes them)."""
    from scipy.stats import false_discovery_control

    return false_discovery_control(p_values, axis=-1, method="bh")


def match_jaspar(patterns: list[Pattern], motifs: dict[str, Motif]) -> pd.DataFrame:
    """Best JASPAR match of each pattern: motif, matrix_id, p_value, q_value, and its strand and offset."""
    from memelite import tomtom

    targets = list(motifs.values())
    queries = [pattern.trimmed()[1].T for pattern in patterns]
    p_values, _, offsets, _, strands = tomtom(queries, [motif.probabilities.T for motif in targets], n_jobs=1)[:5]
    p_values = np.asarray(p_values, dtype=np.float64).reshape(len(patterns), len(targets))
    q_values = benjamini_hochberg(p_values)
    best = p_values.argmin(axis=1)
    rows = np.arange(len(patterns))
    return pd.DataFrame(
        {
            "motif": [targets[i].name for i in best],
            "matrix_id": [targets[i].matrix_id for i in best],
            "p_value": p_values[rows, best],
            "q_value": q_values[rows, best],
            "strand": np.asarray(strands).reshape(p_values.shape)[rows, best],
            "offset": np.asarray(offsets).reshape(p_values.shape)[rows, best],
        }
    )


def motif_groups(patterns: list[Pattern], matches: pd.DataFrame, q_value: float) -> list[list[int]]:
    """Indices of the patterns of each motif: those of one sign whose best match, at q < `q_value`, is one motif.

    TF-MoDISco splits one motif into several patterns when its sites sit close together
    (each seqlet then carries a neighbour at its own spacing); named alike, they are one motif.
    A pattern without a significant match is a motif of its own.
    """
    groups: dict[tuple, list[int]] = {}
    for index, pattern in enumerate(patterns):
        significant = matches["q_value"].iloc[index] < q_value
        key = (pattern.sign, matches["matrix_id"].iloc[index]) if significant else ("unmatched", index)
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def motif_table(patterns: list[Pattern], matches: pd.DataFrame, q_value: float = Q_VALUE) -> pd.DataFrame:
    """motifs.tsv (module docstring): one row per motif, rank 1 = most attribution.

    `lead` is the motif's most significant pattern (then the one with most attribution): its
    consensus, sign and q-value are the motif's, and the logos figure draws its CWM.
    """
    rows = []
    for members in motif_groups(patterns, matches, q_value):
        lead = min(members, key=lambda index: (matches["q_value"].iloc[index], -patterns[index].attribution))
        rows.append(
            {
                "motif": matches["motif"].iloc[lead],
                "matrix_id": matches["matrix_id"].iloc[lead],
                "q_value": matches["q_value"].iloc[lead],
                "p_value": matches["p_value"].iloc[lead],
                "seqlets": sum(patterns[index].seqlets for index in members),
                "sign": patterns[lead].sign,
                "attribution": sum(patterns[index].attribution for index in members),
                "consensus": "".join(ALPHABET[i] for i in patterns[lead].trimmed()[1].argmax(axis=1)),
                "patterns": len(members),
                "lead": lead,
                "strand": matches["strand"].iloc[lead],
            }
        )
    table = pd.DataFrame(rows, columns=[*COLUMNS[1:], "lead", "strand"])
    table = table.sort_values("attribution", ascending=False, kind="stable").reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table


def write_motif_table(path: str | Path, table: pd.DataFrame) -> None:
    atomic_write_text(path, table[COLUMNS].to_csv(sep="\t", index=False, float_format="%.4g"))


LOGO_ROWS = 10  # motifs drawn in the logos figure, by rank


def plot_logos(path: str | Path, table: pd.DataFrame, patterns: list[Pattern], motifs: dict[str, Motif], title: str):
    """Each motif's contribution logo (its lead pattern's CWM) beside its best JASPAR match, by rank."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from epiformer.io.files import atomic_write

    by_id = {motif.matrix_id: motif for motif in motifs.values()}
    shown = table.head(LOGO_ROWS)
    rows = max(1, len(shown))
    figure, axes = plt.subplots(rows, 2, figsize=(11, 1.5 * rows + 0.6), squeeze=False, width_ratios=[5, 4])
    for (left, right), row in zip(axes, shown.itertuples()):
        cwm = patterns[row.lead].trimmed()[0]
        logomaker.Logo(pd.DataFrame(cwm, columns=list(ALPHABET)), ax=left, show_spines=False)
        left.set_title(
            f"{row.rank}. {row.consensus} ({row.sign}, {row.seqlets} seqlets, {row.patterns} pattern(s))",
            fontsize=9,
            loc="left",
        )
        left.set_ylabel("contribution", fontsize=8)
        match = by_id[row.matrix_id]
        # Drawn on the strand Tomtom matched, so that the two logos read alike.
        probabilities = match.probabilities[::-1, ::-1] if row.strand == 1 else match.probabilities
        bits = logomaker.transform_matrix(
            pd.DataFrame(probabilities, columns=list(ALPHABET)), from_type="probability", to_type="information"
        )
        logomaker.Logo(bits, ax=right, show_spines=False)
        right.set_ylim(0, 2)
        verdict = "match" if row.q_value < Q_VALUE else "no significant match; nearest"
        strand = " (rev. comp.)" if row.strand == 1 else ""
        right.set_title(
            f"{verdict}: {match.name} {match.matrix_id}{strand}, q = {row.q_value:.2g}", fontsize=9, loc="left"
        )
        right.set_ylabel("bits", fontsize=8)
    if shown.empty:
        axes[0, 0].text(0.5, 0.5, "TF-MoDISco found no pattern", ha="center", va="center")
        for axis in axes[0]:
            axis.set_axis_off()
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=110, format="png"))
    plt.close(figure)


def discover_motifs(
    attributions_path: str | Path,
    jaspar_path: str | Path,
    motifs_path: str | Path,
    logos_path: str | Path,
    spec: ModiscoSpec = ModiscoSpec(),
    title: str = "",
) -> pd.DataFrame:
    """attributions.safetensors -> motifs.tsv and the logos figure (module docstring); returns the table."""
    from epiformer.interpret.attribution_store import read_attributions
    from epiformer.sequence.motifs import read_jaspar

    motifs = read_jaspar(jaspar_path)
    if not motifs:
        raise ValueError(f"{jaspar_path}: no motif. Give a JASPAR-format file (explain.jaspar in the config).")
    tensors = read_attributions(attributions_path)
    onehot = {element: tensors[f"{element}_onehot"] for element in ELEMENTS}
    hypothetical = {element: tensors[f"{element}_hypothetical"].astype(np.float32) for element in ELEMENTS}
    patterns = discover_patterns(*modisco_inputs(onehot, hypothetical), spec)
    log.info("TF-MoDISco: %d pattern(s) from %d pairs", len(patterns), len(tensors["pair_id"]))
    if patterns:
        table = motif_table(patterns, match_jaspar(patterns, motifs))
    else:
        table = pd.DataFrame(columns=[*COLUMNS, "lead", "strand"])
    for row in table.head(LOGO_ROWS).itertuples():
        log.info(
            "%d. %s (%s) q=%.2g, %d seqlets, %s", row.rank, row.motif, row.sign, row.q_value, row.seqlets, row.consensus
        )
    write_motif_table(motifs_path, table)
    plot_logos(logos_path, table, patterns, motifs, title)
    return table
