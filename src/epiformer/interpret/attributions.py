"""Attributions: which bases of a pair's two windows drive its score (the workflow's `explain` target).

Every method attributes the model's *logit* to every base and channel of the enhancer and
promoter windows, as float [N, L, 4] arrays (channels A, C, G, T):

- `ism`, in-silico mutagenesis, exact (the default and the reference): the logit with the
  base replaced by each other base, minus the pair's logit (0 at the observed base).
  3 x (Le + Lp) model passes per pair.
- `integrated_gradients` (captum's IntegratedGradients, not multiplied by the inputs): the
  logit's gradient averaged along the straight path from a uniform baseline (0.25 of each
  base) to the one-hot sequence; `steps` passes per pair.
- `saliency` (captum's Saliency): the logit's gradient at the sequence; one pass.

All are returned as TF-MoDISco's *hypothetical contributions*: centred, the mean over the
four channels removed at every base, so that a base's value says how much better or worse
it is than an average base there. The *contribution* of a base, the per-base track, is
the hypothetical value of the base that is there (`contributions`). The fast methods'
agreement with ISM is measured on every run (`explain_pairs`): on pairs where the model is
saturated, integrated gradients spread the credit over redundant sites and rank bases
unlike ISM (docs/explain.md has the numbers).

Pairs are the test pairs with the highest scores (`choose_pairs`): attributions explain what
the model found in pairs it calls interacting. Stored compactly (`attribution_store`): the
sequences as the shards pack them (4 bits a base) and the hypothetical contributions as
float16, in one safetensors file; and the contributions in genome coordinates as a bigWig
(`contribution_signal`, averaged where windows of several pairs overlap).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from epiformer.constants import ELEMENTS
from epiformer.interpret.attribution_store import write_attributions
from epiformer.io.files import atomic_write_text
from epiformer.io.predictions import read_predictions
from epiformer.io.runlog import progress

log = logging.getLogger(__name__)
FAST_METHODS = ("integrated_gradients", "saliency")
METHODS = ("ism", *FAST_METHODS)
BASELINE = 0.25  # integrated gradients start from the uniform base: no base preferred


class AttributionError(ValueError):
    """Inputs that cannot be explained, reported with the file and the fix."""


@dataclass(frozen=True)
class ExplainSpec:
    """The `explain:` config block (config/config.yaml documents each key)."""

    top_pairs: int = 250  # test pairs with the highest scores (0: every test pair)
    method: str = "ism"  # or a fast method: integrated_gradients, saliency
    steps: int = 32  # integrated gradients: points along the path
    ism_pairs: int = 20  # of those pairs, how many also get ISM, to measure the method's agreement with it
    batch_size: int = 512  # model passes at a time

    def __post_init__(self):
        if self.method not in METHODS:
            raise AttributionError(f"explain.method is {self.method!r}; use one of {', '.join(METHODS)}.")
        for key in ("top_pairs", "ism_pairs"):
            if getattr(self, key) < 0:
                raise AttributionError(f"explain.{key} is {getattr(self, key)}; give 0 or more.")
        for key in ("steps", "batch_size"):
            if getattr(self, key) < 1:
                raise AttributionError(f"explain.{key} is {getattr(self, key)}; give 1 or more.")


def choose_pairs(windows: pd.DataFrame, predictions: pd.DataFrame, top_pairs: int) -> pd.DataFrame:
    """The windows rows of the `top_pairs` best-scored test pairs (all when 0), best first, with their `score`."""
    test = windows[windows["split"] == "test"].drop(columns=["label"], errors="ignore")
    scored = test.merge(predictions[["pair_id", "label", "score"]], on="pair_id", how="inner")
    if scored.empty:
        raise AttributionError(
            "No test pair has a prediction: give the predictions.tsv of this cell line's model "
            "(results/{cell}/{model}/predictions.tsv), written from the same windows.tsv."
        )
    scored = scored.sort_values(["score", "pair_id"], ascending=[False, True], kind="stable")
    return scored.head(top_pairs) if top_pairs else scored


def logit_function(model: torch.nn.Module):
    """(enhancer, promoter, distance) -> logits [N]: the model with every window base valid, as in scoring."""

    def logits(enhancer: torch.Tensor, promoter: torch.Tensor, distance: torch.Tensor) -> torch.Tensor:
        return model(enhancer, promoter, distance=distance)

    return logits


def centred(values: torch.Tensor) -> torch.Tensor:
    """Hypothetical contributions: the mean over the four channels removed at every base."""
    return values - values.mean(dim=-1, keepdim=True)


def integrated_gradients(model, enhancer, promoter, distance, steps: int, batch_size: int):
    """Hypothetical contributions [N, Le, 4], [N, Lp, 4] by integrated gradients (module docstring)."""
    from captum.attr import IntegratedGradients

    method = IntegratedGradients(logit_function(model), multiply_by_inputs=False)
    baselines = (torch.full_like(enhancer, BASELINE), torch.full_like(promoter, BASELINE))
    gradients = method.attribute(
        (enhancer, promoter),
        baselines=baselines,
        additional_forward_args=(distance,),
        n_steps=steps,
        # Backward passes hold every layer's activations: a quarter of the forward batch keeps
        # a 5 kb pair's path within about 1.5 GB.
        internal_batch_size=max(1, batch_size // 4),
    )
    return tuple(centred(part.detach()) for part in gradients)


def saliency(model, enhancer, promoter, distance):
    """Hypothetical contributions [N, Le, 4], [N, Lp, 4]: the logit's gradient at the sequence (captum's Saliency)."""
    from captum.attr import Saliency

    inputs = (enhancer.detach().requires_grad_(), promoter.detach().requires_grad_())
    gradients = Saliency(logit_function(model)).attribute(inputs, additional_forward_args=(distance,), abs=False)
    return tuple(centred(part.detach()) for part in gradients)


def single_base_substitutions(sequence: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions and new bases of every sequence one base away from `sequence` [L, 4] (one-hot; N all zero).

    Three per base, four at an N (each base in its place), in position order.
    """
    positions, bases = (sequence == 0).nonzero(as_tuple=True)
    return positions, bases


def mutants_of(sequence: torch.Tensor, positions: torch.Tensor, bases: torch.Tensor) -> torch.Tensor:
    """[k, L, 4]: `sequence` with base `bases[i]` at `positions[i]`, one substitution per copy."""
    mutants = sequence.expand(len(positions), *sequence.shape).clone()
    mutants[torch.arange(len(positions)), positions] = torch.nn.functional.one_hot(bases, 4).to(sequence.dtype)
    return mutants


@torch.no_grad()
def in_silico_mutagenesis(model, enhancer, promoter, distance, batch_size: int):
    """Hypothetical contributions [N, Le, 4], [N, Lp, 4] by in-silico mutagenesis (module docstring).

    Mutants are made `batch_size` at a time, so memory stays flat for long windows (a pair of
    3 kb + 2 kb windows has 15,000 of them).
    """
    logits = logit_function(model)
    width = enhancer.shape[1]
    effects = torch.zeros(len(enhancer), width + promoter.shape[1], 4)
    for row in progress(range(len(enhancer)), len(enhancer), "in-silico mutagenesis"):
        sequence = torch.cat([enhancer[row], promoter[row]])
        positions, bases = single_base_substitutions(sequence)
        reference = logits(enhancer[row : row + 1], promoter[row : row + 1], distance[row : row + 1])
        for start in range(0, len(positions), batch_size):
            part = slice(start, start + batch_size)
            mutants = mutants_of(sequence, positions[part], bases[part])
            changed = logits(mutants[:, :width], mutants[:, width:], distance[row].expand(len(mutants)))
            effects[row, positions[part], bases[part]] = changed - reference
    return centred(effects[:, :width]), centred(effects[:, width:])


def contributions(hypothetical: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """[N, L, 4], [N, L, 4] -> [N, L]: the hypothetical contribution of the base that is there (0 at N)."""
    return (hypothetical * onehot).sum(axis=-1)


def rank_agreement(fast: np.ndarray, reference: np.ndarray) -> float:
    """Spearman rank correlation of two equally shaped arrays of per-base values."""
    from scipy.stats import spearmanr

    return float(spearmanr(np.ravel(fast), np.ravel(reference))[0])


def attribute(model, enhancer, promoter, distance, spec: ExplainSpec, method: str | None = None):
    """Hypothetical contributions of both windows by `method` (default: the spec's), as float32 numpy arrays."""
    method = method or spec.method
    if method == "ism":
        parts = in_silico_mutagenesis(model, enhancer, promoter, distance, spec.batch_size)
    else:
        chunk = max(1, spec.batch_size // 8)  # pairs at a time; integrated gradients batch their path points
        pieces = [
            fast_method(method, model, enhancer[i : i + chunk], promoter[i : i + chunk], distance[i : i + chunk], spec)
            for i in progress(range(0, len(enhancer), chunk), -(-len(enhancer) // chunk), method.replace("_", " "))
        ]
        parts = tuple(torch.cat([piece[k] for piece in pieces]) for k in range(2))
    return tuple(part.numpy().astype(np.float32) for part in parts)


def fast_method(method: str, model, enhancer, promoter, distance, spec: ExplainSpec):
    if method == "saliency":
        return saliency(model, enhancer, promoter, distance)
    return integrated_gradients(model, enhancer, promoter, distance, spec.steps, spec.batch_size)


def explain_pairs(model, onehot: dict[str, np.ndarray], distance: np.ndarray, spec: ExplainSpec) -> dict:
    """Hypothetical contributions of every pair ({element: [N, L, 4]}) by the spec's method, and each fast method's
    agreement with ISM.

    The agreement: on the first `ism_pairs` pairs, ISM and each fast method, and the Spearman
    correlation of their per-base contributions, over all bases and over the tenth of bases
    where ISM's effect is largest; with the seconds each method takes per pair.
    """
    model.eval()
    tensors = [torch.as_tensor(onehot[element], dtype=torch.float32) for element in ELEMENTS]
    distance = torch.tensor(np.asarray(distance))  # a copy: pandas may hand over a read-only array
    computed = {}

    def run(method: str, n: int) -> tuple[np.ndarray, ...]:
        if method not in computed or len(computed[method][0][0]) < n:
            start = time.monotonic()
            parts = attribute(model, *(tensor[:n] for tensor in tensors), distance[:n], spec, method)
            computed[method] = (parts, (time.monotonic() - start) / max(1, n))
        return tuple(part[:n] for part in computed[method][0])

    hypothetical = dict(zip(ELEMENTS, run(spec.method, len(distance))))
    agreement = {"method": spec.method, "pairs": len(distance), "seconds_per_pair": computed[spec.method][1]}
    n = min(spec.ism_pairs, len(distance))
    if n:
        exact = per_base_contributions(run("ism", n), onehot, n)
        agreement["ism_pairs"] = n
        agreement["ism_seconds_per_pair"] = computed["ism"][1]
        for method in FAST_METHODS:
            fast = per_base_contributions(run(method, n), onehot, n)
            strongest = np.abs(exact) >= np.quantile(np.abs(exact), 0.9)
            agreement[method] = {
                "spearman_all_bases": rank_agreement(fast, exact),
                "spearman_top_tenth_bases": rank_agreement(fast[strongest], exact[strongest]),
                "seconds_per_pair": computed[method][1],
            }
    return {"hypothetical": hypothetical, "agreement": agreement}


def per_base_contributions(parts: tuple[np.ndarray, ...], onehot: dict[str, np.ndarray], n: int) -> np.ndarray:
    """[n, Le + Lp]: the contributions of the first n pairs' bases, enhancer then promoter."""
    return np.concatenate([contributions(part[:n], onehot[e][:n]) for e, part in zip(ELEMENTS, parts)], axis=1)


def contribution_signal(pairs: pd.DataFrame, per_base: dict[str, np.ndarray]) -> dict[str, tuple]:
    """Per chromosome, (starts, values) of the per-base contributions in genome coordinates (bigwig's contract).

    `pairs` holds the windows' coordinates (windows.tsv columns); `per_base` [N, L] per
    element. A base in the windows of several pairs gets the mean of their values.
    """
    from epiformer.io.bigwig import mean_per_base

    windows: dict[str, tuple[list, list]] = {}
    for element in ELEMENTS:
        for chrom, start, values in zip(pairs[f"{element}_chrom"], pairs[f"{element}_start"], per_base[element]):
            starts, arrays = windows.setdefault(str(chrom), ([], []))
            starts.append(int(start))
            arrays.append(values)
    return {chrom: mean_per_base(starts, arrays) for chrom, (starts, arrays) in windows.items()}


def write_agreement(path: str | Path, agreement: dict) -> None:
    """The agreement as strict JSON: an undefined correlation (constant contributions) is null, not NaN."""

    def strict(value):
        if isinstance(value, dict):
            return {key: strict(item) for key, item in value.items()}
        return None if isinstance(value, float) and np.isnan(value) else value

    atomic_write_text(path, json.dumps(strict(agreement), indent=2, allow_nan=False) + "\n")


def explain_model(
    model_dir: str | Path,
    windows_path: str | Path,
    predictions_path: str | Path,
    genome_path: str | Path,
    attributions_path: str | Path,
    bigwig_path: str | Path,
    agreement_path: str | Path,
    spec: ExplainSpec = ExplainSpec(),
) -> dict:
    """Attributions of a model's best-scored test pairs: the safetensors file, the bigWig and the agreement with ISM."""
    from epiformer.data.encode import encode_windows
    from epiformer.data.genome import Genome
    from epiformer.inference.trained_model import load_trained_model
    from epiformer.io.bigwig import write_bigwig
    from epiformer.io.files import read_windows

    model, _ = load_trained_model(model_dir, elements_only_for="the explain target")
    pairs = choose_pairs(read_windows(windows_path), read_predictions(predictions_path), spec.top_pairs)
    log.info("Explaining %d test pairs of %s by %s", len(pairs), model_dir, spec.method)
    with Genome(genome_path) as genome:
        packed = encode_windows(genome, pairs, flank=0)  # centred windows, as predict and evaluation read them
        sizes = genome.sizes
    onehot = {element: unpack_windows(packed[element], pairs, element) for element in ELEMENTS}
    explained = explain_pairs(model, onehot, pairs["distance"].to_numpy(), spec)
    per_base = {element: contributions(explained["hypothetical"][element], onehot[element]) for element in ELEMENTS}
    write_attributions(
        attributions_path, pairs, packed, explained["hypothetical"], {"method": spec.method, "steps": spec.steps}
    )
    write_bigwig(bigwig_path, sizes, contribution_signal(pairs, per_base))
    write_agreement(agreement_path, explained["agreement"])
    return explained["agreement"]


def unpack_windows(packed: np.ndarray, pairs: pd.DataFrame, element: str) -> np.ndarray:
    """uint8 [N, L/2] packed windows -> float32 one-hot [N, L, 4]; L from the windows' coordinates."""
    from epiformer.sequence.onehot import unpack

    width = int((pairs[f"{element}_end"] - pairs[f"{element}_start"]).iloc[0])
    return unpack(packed, width).astype(np.float32)
