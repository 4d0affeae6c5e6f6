"""Motif discovery: real TF-MoDISco and Tomtom on attributions with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from epiformer.constants import ELEMENTS
from epiformer.interpret.attribution_store import write_attributions
from epiformer.interpret.motif_discovery import (
    COLUMNS,
    ModiscoSpec,
    Pattern,
    benjamini_hochberg,
    discover_motifs,
    match_jaspar,
    motif_groups,
)
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar, sample_site

JASPAR = read_jaspar(bundled_jaspar_path())


def test_benjamini_hochberg_q_values_by_hand():
    p_values = np.array([[0.01, 0.04, 0.03, 0.2], [0.5, 0.5, 0.5, 0.5]])
    # Sorted 0.01, 0.03, 0.04, 0.2 -> x4/1, x4/2, x4/3, x4/4 = 0.04, 0.06, 0.0533, 0.2 -> monotone from the end.
    expected = [[0.04, 0.16 / 3, 0.16 / 3, 0.2], [0.5, 0.5, 0.5, 0.5]]
    np.testing.assert_allclose(benjamini_hochberg(p_values), expected)


@pytest.mark.parametrize("strand", ["forward", "reverse"])
def test_a_jaspar_matrix_matches_itself_on_either_strand(strand):
    gata1 = JASPAR["GATA1"].probabilities
    ppm = gata1 if strand == "forward" else gata1[::-1, ::-1]
    pattern = Pattern("+", 50, cwm=ppm * 0.5, ppm=ppm, attribution=1.0)
    match = match_jaspar([pattern], JASPAR).iloc[0]
    assert match["motif"] == "GATA1" and match["matrix_id"] == JASPAR["GATA1"].matrix_id
    assert match["q_value"] < 0.05
    assert match["strand"] == (0 if strand == "forward" else 1)  # the logos draw the match on this strand


def test_patterns_named_alike_with_one_sign_are_one_motif():
    patterns = [Pattern(sign, 10, np.ones((5, 4)), np.full((5, 4), 0.25), 1.0) for sign in "++-++"]
    matches = pd.DataFrame({"matrix_id": ["MA1", "MA1", "MA1", "MA2", "MA1"], "q_value": [0.01, 0.02, 0.01, 0.01, 0.5]})
    # Same match and sign: 0 and 1. The other sign: 2. Another motif: 3. Not significant: 4, alone.
    assert motif_groups(patterns, matches, 0.05) == [[0, 1], [2], [3], [4]]


def planted_windows(rng, n: int, width: int, motif_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Random windows each holding one site of one of `motif_names`, and attributions that mark the site.

    The hypothetical contribution is +1 for a site's own base (0 elsewhere, centred), plus noise:
    the answer TF-MoDISco should find is the planted motifs. (TF-MoDISco keeps at most a fifth
    of all windows as seqlet candidates, so sites must cover less than that.)
    """
    onehot = np.eye(4, dtype=np.float32)[rng.integers(0, 4, (n, width))]
    hypothetical = rng.normal(0, 0.05, (n, width, 4)).astype(np.float32)
    for row in range(n):
        motif = JASPAR[motif_names[row % len(motif_names)]]
        for start in rng.choice(np.arange(5, width - motif.width - 5), size=1):
            site = sample_site(motif, rng, sharpness=3.0)
            onehot[row, start : start + motif.width] = np.eye(4, dtype=np.float32)[["ACGT".index(b) for b in site]]
            hypothetical[row, start : start + motif.width] += onehot[row, start : start + motif.width]
    hypothetical -= hypothetical.mean(axis=-1, keepdims=True)
    return onehot, hypothetical


@pytest.fixture(scope="module")
def discovered(tmp_path_factory):
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("motifs")
    onehot, hypothetical = {}, {}
    for element, names in zip(ELEMENTS, (["GATA1", "CTCF"], ["YY1", "CTCF"])):
        onehot[element], hypothetical[element] = planted_windows(rng, 150, 160, names)
    packed = {e: np.packbits(onehot[e].astype(np.uint8).reshape(150, -1), axis=1) for e in ELEMENTS}
    pairs = pd.DataFrame({"pair_id": np.arange(150), "score": np.linspace(1, 0.5, 150)})
    write_attributions(folder / "attributions.safetensors", pairs, packed, hypothetical, {"method": "test"})
    table = discover_motifs(
        folder / "attributions.safetensors",
        bundled_jaspar_path(),
        folder / "motifs.tsv",
        folder / "motifs.png",
        ModiscoSpec(),
        title="planted",
    )
    return {"folder": folder, "table": table}


def test_the_planted_motifs_are_found_named_and_ranked_first(discovered):
    table = pd.read_csv(discovered["folder"] / "motifs.tsv", sep="\t")
    assert list(table.columns) == COLUMNS
    significant = table[table["q_value"] < 0.05]
    assert set(significant["motif"].head(3)) == {"GATA1", "CTCF", "YY1"}, table.head(6).to_string()
    assert table["rank"].tolist() == list(range(1, len(table) + 1))
    assert table["attribution"].is_monotonic_decreasing
    assert (significant.head(3)["sign"] == "+").all()
    assert significant.head(3)["seqlets"].min() >= 20


def test_the_logos_figure_is_written(discovered):
    image = (discovered["folder"] / "motifs.png").read_bytes()
    assert image.startswith(b"\x89PNG") and len(image) > 10_000


def test_a_file_without_motifs_is_refused(tmp_path, discovered):
    (tmp_path / "empty.jaspar").write_text("")
    with pytest.raises(ValueError, match="explain.jaspar"):
        discover_motifs(
            discovered["folder"] / "attributions.safetensors",
            tmp_path / "empty.jaspar",
            tmp_path / "motifs.tsv",
            tmp_path / "motifs.png",
        )
    assert not (tmp_path / "motifs.tsv").exists()


def test_attributions_without_signal_give_an_empty_table_and_a_figure(tmp_path):
    rng = np.random.default_rng(1)
    onehot = {e: np.eye(4, dtype=np.float32)[rng.integers(0, 4, (20, 40))] for e in ELEMENTS}
    packed = {e: np.packbits(onehot[e].astype(np.uint8).reshape(20, -1), axis=1) for e in ELEMENTS}
    zeros = {e: np.zeros_like(onehot[e]) for e in ELEMENTS}
    pairs = pd.DataFrame({"pair_id": np.arange(20), "score": np.full(20, 0.5)})
    write_attributions(tmp_path / "a.safetensors", pairs, packed, zeros, {"method": "test"})
    table = discover_motifs(tmp_path / "a.safetensors", bundled_jaspar_path(), tmp_path / "m.tsv", tmp_path / "m.png")
    assert table.empty
    assert pd.read_csv(tmp_path / "m.tsv", sep="\t").columns.tolist() == COLUMNS
    assert (tmp_path / "m.png").read_bytes().startswith(b"\x89PNG")
