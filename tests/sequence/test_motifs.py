import numpy as np

from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar, reverse_complement, sample_site


def test_bundled_jaspar_has_the_sixteen_documented_matrices():
    motifs = read_jaspar(bundled_jaspar_path())
    assert len(motifs) == 16
    assert motifs["CTCF"].matrix_id == "MA0139.1"
    assert motifs["CTCF"].width == 19
    for motif in motifs.values():
        np.testing.assert_allclose(motif.probabilities.sum(axis=1), 1.0)


def test_sharp_sampling_gives_the_consensus_and_plain_sampling_varies():
    motif = read_jaspar(bundled_jaspar_path())["YY1"]
    rng = np.random.default_rng(0)
    assert sample_site(motif, rng, sharpness=50.0) == motif.consensus()
    sites = {sample_site(motif, rng) for _ in range(50)}
    assert len(sites) > 10


def test_reverse_complement():
    assert reverse_complement("AACGTn") == "nACGTT"


def test_malformed_jaspar_names_the_line(tmp_path):
    path = tmp_path / "bad.jaspar"
    path.write_text(">MA1 X\nA [ 1 2 ]\nC [ 1 2 ]\nQ [ 1 2 ]\n")
    try:
        read_jaspar(path)
    except ValueError as error:
        assert "line 4" in str(error)
    else:
        raise AssertionError("malformed JASPAR accepted")
