"""Attributions (epiformer.interpret.attributions): ISM is exact, the fast methods agree with it at planted sites."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from epiformer.constants import ELEMENTS
from epiformer.data.encode import encode_windows
from epiformer.data.genome import Genome
from epiformer.inference.trained_model import load_trained_model
from epiformer.interpret.attribution_store import read_attributions, write_attributions
from epiformer.interpret.attributions import (
    BASELINE,
    AttributionError,
    ExplainSpec,
    choose_pairs,
    contribution_signal,
    contributions,
    explain_pairs,
    in_silico_mutagenesis,
    integrated_gradients,
    mutants_of,
    saliency,
    single_base_substitutions,
)
from epiformer.io.files import read_windows
from epiformer.model.configs import ModelConfig
from epiformer.model.transformer import EPITransformer
from epiformer.sequence.motifs import bundled_jaspar_path, read_jaspar
from epiformer.sequence.onehot import unpack
from tests.helpers import TINY_MODEL


def random_onehot(rng, n: int, length: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, 4, (n, length))), 4).float()


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return EPITransformer(ModelConfig(attention="linear", **TINY_MODEL)).eval()


@pytest.fixture
def windows_pair():
    rng = np.random.default_rng(3)
    return random_onehot(rng, 3, 24), random_onehot(rng, 3, 16), torch.tensor([5000, 20000, 80000])


def test_single_base_mutants_differ_from_the_sequence_at_their_one_base():
    sequence = random_onehot(np.random.default_rng(0), 1, 10)[0]
    sequence[4] = 0  # an N: every base may take its place
    positions, bases = single_base_substitutions(sequence)
    assert sorted(zip(positions.tolist(), bases.tolist())) == sorted(
        (position, base) for position in range(10) for base in range(4) if sequence[position, base] == 0
    )
    assert len(positions) == 3 * 9 + 4
    mutants = mutants_of(sequence, positions, bases)
    for mutant, position, base in zip(mutants, positions, bases):
        changed = (mutant != sequence).any(dim=-1)
        assert changed.nonzero().flatten().tolist() == [position]
        assert mutant[position].argmax() == base and mutant[position].sum() == 1


def test_ism_is_the_logit_change_of_every_single_base_substitution(tiny_model, windows_pair):
    enhancer, promoter, distance = windows_pair
    enhancer = enhancer.clone()
    enhancer[0, 5] = 0  # an N, whose four substitutions are all measured
    ism_enhancer, ism_promoter = in_silico_mutagenesis(tiny_model, enhancer, promoter, distance, batch_size=17)
    with torch.no_grad():
        for row, element, position in [
            (0, "enhancer", 0),
            (0, "enhancer", 5),
            (1, "enhancer", 13),
            (2, "promoter", 15),
            (0, "promoter", 7),
        ]:
            logits = []
            for base in range(4):
                mutated = {"enhancer": enhancer[row : row + 1].clone(), "promoter": promoter[row : row + 1].clone()}
                mutated[element][0, position] = torch.nn.functional.one_hot(torch.tensor(base), 4).float()
                logits.append(tiny_model(mutated["enhancer"], mutated["promoter"]).item())
            direct = np.array(logits) - np.mean(logits)  # centred, as hypothetical contributions are
            ism = (ism_enhancer if element == "enhancer" else ism_promoter)[row, position].numpy()
            np.testing.assert_allclose(ism, direct, atol=1e-5)
    np.testing.assert_allclose(ism_enhancer.sum(-1), 0, atol=1e-5)


@pytest.fixture(params=[False, True], ids=["sequence", "with distance"])
def any_model(request):
    torch.manual_seed(0)
    return EPITransformer(ModelConfig(attention="linear", distance=request.param, **TINY_MODEL)).eval()


def test_integrated_gradients_add_up_to_the_logit_change_from_the_baseline(any_model, windows_pair):
    """Completeness: with hypothetical contributions centred, the observed bases' sum is the integral of
    the gradient times (sequence - uniform baseline), logit(sequence) - logit(baseline), each pair with its
    own distance (captum splits the path points into batches of 7 here)."""
    enhancer, promoter, distance = windows_pair
    parts = integrated_gradients(any_model, enhancer, promoter, distance, steps=256, batch_size=28)
    total = sum(contributions(part.numpy(), onehot.numpy()).sum(axis=1) for part, onehot in zip(parts, windows_pair))
    with torch.no_grad():
        baseline = (torch.full_like(enhancer, BASELINE), torch.full_like(promoter, BASELINE))
        change = any_model(enhancer, promoter, distance=distance) - any_model(*baseline, distance=distance)
    np.testing.assert_allclose(total, change.numpy(), rtol=0.02, atol=1e-3)


def test_saliency_is_the_centred_gradient(any_model, windows_pair):
    enhancer, promoter, distance = windows_pair
    inputs = [enhancer.clone().requires_grad_(), promoter.clone().requires_grad_()]
    any_model(*inputs, distance=distance).sum().backward()
    for part, given in zip(saliency(any_model, enhancer, promoter, distance), inputs):
        np.testing.assert_allclose(part.numpy(), (given.grad - given.grad.mean(-1, keepdim=True)).numpy(), atol=1e-6)


def planted_site_cores(onehot: np.ndarray, motif_names: str, motifs) -> np.ndarray:
    """bool [L]: the core positions (probability > 0.7) of strong matches of the truth's motifs in one window."""
    cores = np.zeros(len(onehot), bool)
    for name in motif_names.split(","):
        if name == "none":  # a blank element: no planted site
            continue
        motif = motifs[name]
        log_odds = np.log2(motif.probabilities / 0.25)
        core = np.flatnonzero(motif.probabilities.max(axis=1) > 0.7)
        width = len(log_odds)
        for strand, positions in ((log_odds, core), (log_odds[::-1, ::-1], width - 1 - core)):
            scores = np.array([(onehot[i : i + width] * strand).sum() for i in range(len(onehot) - width + 1)])
            for start in np.flatnonzero(scores > 0.75 * log_odds.max(axis=1).sum()):
                cores[start + positions] = True
    return cores


@pytest.fixture(scope="module")
def explained_demo(tiny_demo, trained_cells):
    """ISM and both fast methods on positive test pairs of the tiny trained demo_a model, and their planted cores."""
    folder = trained_cells["demo_a"]
    model, _ = load_trained_model(folder / "linear")
    truth = pd.read_csv(tiny_demo["demo_a_truth"], sep="\t")
    windows = read_windows(folder / "windows.tsv").merge(truth.drop(columns="label"), on="pair_id")
    pairs = windows[(windows["split"] != "train") & (windows["label"] == 1)].head(16)
    with Genome(tiny_demo["genome"]) as genome:
        packed = encode_windows(genome, pairs, flank=0)
    onehot = {e: unpack(packed[e], int((pairs[f"{e}_end"] - pairs[f"{e}_start"]).iloc[0])) for e in ELEMENTS}
    tensors = [torch.as_tensor(onehot[e], dtype=torch.float32) for e in ELEMENTS]
    distance = torch.as_tensor(pairs["distance"].to_numpy())
    spec = ExplainSpec(steps=32, batch_size=512)
    motifs = read_jaspar(bundled_jaspar_path())
    cores = np.concatenate(
        [
            np.array(
                [planted_site_cores(window, names, motifs) for window, names in zip(onehot[e], pairs[f"{e}_motifs"])]
            )
            for e in ELEMENTS
        ],
        axis=1,
    )
    per_base = {}
    for method, run in {
        "ism": lambda: in_silico_mutagenesis(model, *tensors, distance, spec.batch_size),
        "integrated_gradients": lambda: integrated_gradients(model, *tensors, distance, spec.steps, spec.batch_size),
        "saliency": lambda: saliency(model, *tensors, distance),
    }.items():
        parts = run()
        per_base[method] = np.concatenate([contributions(p.numpy(), onehot[e]) for p, e in zip(parts, ELEMENTS)], 1)
    return {"cores": cores, "per_base": per_base}


@pytest.mark.parametrize("method", ["integrated_gradients", "saliency"])
def test_fast_methods_rank_the_planted_site_bases_as_ism_does(explained_demo, method):
    cores = explained_demo["cores"]
    assert cores.sum() >= 100, "too few planted core bases in the windows to compare"
    exact, fast = explained_demo["per_base"]["ism"], explained_demo["per_base"][method]
    rho = spearmanr(fast[cores], exact[cores])[0]
    assert rho > 0.6, f"{method} vs ISM at {cores.sum()} planted core bases: Spearman {rho:.2f}"
    # Against a null of the same bases in another pair's order, agreement is chance.
    shuffled = spearmanr(np.roll(fast, 1, axis=0)[cores], exact[cores])[0]
    assert abs(shuffled) < 0.3


def test_explain_pairs_reports_each_fast_methods_agreement_with_ism(tiny_model, windows_pair):
    enhancer, promoter, distance = windows_pair
    onehot = {"enhancer": enhancer.numpy(), "promoter": promoter.numpy()}
    explained = explain_pairs(tiny_model, onehot, distance.numpy(), ExplainSpec(method="ism", ism_pairs=2))
    assert explained["hypothetical"]["enhancer"].shape == (3, 24, 4)
    agreement = explained["agreement"]
    assert agreement["method"] == "ism" and agreement["ism_pairs"] == 2
    for method in ("integrated_gradients", "saliency"):
        assert -1 <= agreement[method]["spearman_all_bases"] <= 1
    # The ISM of the first two pairs is that of all three, cut (computed once, not again).
    alone = in_silico_mutagenesis(tiny_model, enhancer[:2], promoter[:2], distance[:2], 512)[0].numpy()
    np.testing.assert_allclose(explained["hypothetical"]["enhancer"][:2], alone, atol=1e-5)


def test_the_best_scored_test_pairs_are_chosen():
    windows = pd.DataFrame({"pair_id": range(6), "label": 1, "split": ["test", "train", "test", "test", "val", "test"]})
    predictions = pd.DataFrame({"pair_id": [0, 2, 3, 5], "label": [1, 0, 1, 0], "score": [0.2, 0.9, 0.5, 0.9]})
    assert choose_pairs(windows, predictions, 3)["pair_id"].tolist() == [2, 5, 3]
    assert choose_pairs(windows, predictions, 0)["pair_id"].tolist() == [2, 5, 3, 0]
    assert choose_pairs(windows, predictions, 3)["label"].tolist() == [0, 0, 1]  # labels from the predictions
    with pytest.raises(AttributionError, match="predictions.tsv"):
        choose_pairs(windows, predictions.iloc[0:0], 3)


def test_bad_settings_name_the_key():
    with pytest.raises(AttributionError, match="explain.method"):
        ExplainSpec(method="deeplift")
    with pytest.raises(AttributionError, match="explain.steps"):
        ExplainSpec(steps=0)


def test_the_attributions_file_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    onehot = {"enhancer": random_onehot(rng, 4, 12).numpy(), "promoter": random_onehot(rng, 4, 8).numpy()}
    packed = {e: np.packbits(onehot[e].astype(np.uint8).reshape(4, -1), axis=1) for e in ELEMENTS}
    hypothetical = {e: rng.normal(size=onehot[e].shape).astype(np.float32) for e in ELEMENTS}
    pairs = pd.DataFrame({"pair_id": [7, 3, 9, 1], "score": [0.9, 0.8, 0.7, 0.6]})
    write_attributions(tmp_path / "a.safetensors", pairs, packed, hypothetical, {"method": "ism"})
    back = read_attributions(tmp_path / "a.safetensors")
    assert back["pair_id"].tolist() == [7, 3, 9, 1]
    for e in ELEMENTS:
        np.testing.assert_array_equal(back[f"{e}_onehot"], onehot[e])
        np.testing.assert_allclose(back[f"{e}_hypothetical"], hypothetical[e], rtol=1e-3, atol=1e-3)  # float16


def test_the_contribution_track_sits_at_the_window_coordinates_and_averages_overlaps():
    pairs = pd.DataFrame(
        {
            "enhancer_chrom": ["chr1", "chr1"],
            "enhancer_start": [100, 102],
            "promoter_chrom": ["chr2", "chr1"],
            "promoter_start": [50, 300],
        }
    )
    per_base = {"enhancer": np.array([[1.0, 2, 3, 4], [10, 20, 30, 40]]), "promoter": np.array([[5.0, 6], [7, 8]])}
    signal = contribution_signal(pairs, per_base)
    starts, values = signal["chr1"]
    assert starts.tolist() == [100, 101, 102, 103, 104, 105, 300, 301]
    np.testing.assert_allclose(values, [1, 2, (3 + 10) / 2, (4 + 20) / 2, 30, 40, 7, 8])
    assert signal["chr2"][0].tolist() == [50, 51]
