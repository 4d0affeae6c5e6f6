"""Scoring new enhancer-promoter pairs with a trained model (`epiformer predict`).

Inputs: a model folder (`results/{cell}/{model}`: `model.json` + `model.safetensors`), a
genome FASTA (any build; an index `.fai` is made beside it if missing) and a pairs file,
TargetFinder CSV or BEDPE (`epiformer.pairs`), with or without labels.

The workflow's own code does every step, so a pair scores here as it does in evaluation:
`windows.make_windows` places windows with the widths and settings recorded in
`model.json` (edge handling, N filter, trans pairs), `encode.encode_windows` encodes them,
and `inference.predict_split` batches them through `batches.PairBatches`: centred windows, no
augmentation. Pairs are encoded and scored `CHUNK_PAIRS` at a time, so memory stays flat
for inputs of any size.

Outputs, each written atomically:
- scores TSV: `pair_id, score` for every scored pair, by pair_id. `pair_id` is the 0-based
  index of the pair among the file's data rows, as everywhere in the workflow; `score` is
  the predicted probability of interaction (float32, written with 7 significant digits).
  Exact duplicate rows are scored, each under its own pair_id.
- unscored TSV: `pair_id, line, reason` for every pair that could not be scored (`line` is
  the 1-based line of the pairs file); only a header when every pair was scored. Reasons
  are the windows stage's (`{enhancer,promoter}_window_off_chromosome`,
  `{enhancer,promoter}_window_mostly_n`) and `trans_pair` (elements on different
  chromosomes, for a model trained without `windows.allow_trans`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors import SafetensorError

from epiformer.constants import ELEMENTS
from epiformer.encode import encode_windows
from epiformer.fileio import atomic_write_text
from epiformer.genome import Genome, GenomeError
from epiformer.inference import load_trained_model, predict_split
from epiformer.model import EPITransformer
from epiformer.pairs import PairsError, fail_at_first_bad_row, read_pairs
from epiformer.runlog import progress
from epiformer.shards import PackedPairs
from epiformer.windows import WindowSpec, check_chromosomes, make_windows

log = logging.getLogger(__name__)
CHUNK_PAIRS = 4096  # pairs encoded and scored at a time (the workflow's default shard size)
MODEL_FILES = ("model.json", "model.safetensors")
SCORE_FORMAT = "%.7g"  # float32 carries about 7 significant digits
UNSCORED_COLUMNS = ["pair_id", "line", "reason"]


class ModelError(ValueError):
    """A model folder that is missing, incomplete, or not written by epiformer training."""


def load_model_folder(
    model_dir: str | Path, device: torch.device | str = "cpu", command: str = "epiformer predict"
) -> tuple[EPITransformer, dict]:
    """The trained model and its `model.json`, or a ModelError that says which folder to give.

    Span models are refused: `command` (the one that asked) scores element windows only.
    """
    model_dir = Path(model_dir)
    hint = (
        "Give a trained model folder, results/<cell>/<model> (or results/pooled/<model>), that holds "
        "model.json and model.safetensors."
    )
    if not model_dir.exists():
        raise ModelError(f"Model folder not found: {model_dir}. {hint}")
    if model_dir.is_file():
        raise ModelError(f"{model_dir} is a file, not a model folder. {hint} (Perhaps {model_dir.parent}?)")
    missing = [name for name in MODEL_FILES if not (model_dir / name).is_file()]
    if missing:
        inside = sorted(path.parent.name for path in model_dir.glob(f"*/{MODEL_FILES[0]}"))
        fix = hint
        if inside:
            fix = f"It holds the model folder(s) {', '.join(inside)}: give one, e.g. --model {model_dir / inside[0]}."
        raise ModelError(f"{model_dir} has no {' or '.join(missing)}. {fix}")
    try:
        description = json.loads((model_dir / "model.json").read_text())
        windows = recorded_windows(description)
        dict(description["model"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ModelError(
            f"{model_dir / 'model.json'} is not a model description written by epiformer training "
            f"({type(error).__name__}: {error}). Re-run training for this model, or restore the file."
        ) from error
    if description["model"].get("input", "elements") == "span":
        raise ModelError(
            f"{model_dir} is a span model (input: span); `{command}` scores element-window models only "
            "for now. Give a model trained with input: elements, or score spans through the workflow's evaluate rule."
        )
    try:
        model, description = load_trained_model(model_dir, device)
    except (RuntimeError, ValueError, TypeError, KeyError, SafetensorError) as error:
        raise ModelError(
            f"{model_dir / 'model.safetensors'} does not load into the model that {model_dir / 'model.json'} "
            f"describes ({type(error).__name__}: {str(error)[:300]}). The two files belong together: copy both "
            "from the same training run, or re-train."
        ) from error
    description["windows"] = windows
    return model, description


def recorded_windows(description: dict) -> dict:
    """The WindowSpec fields model.json records (`windows`), with both widths (KeyError if absent).

    A model.json written before shard format 3 kept the widths apart, under `widths`, and
    perhaps no settings; it is read the same way.
    """
    windows = dict(description.get("windows") or {})
    for element in ELEMENTS:
        windows.setdefault(f"{element}_width", description.get("widths", {}).get(element))
        windows[f"{element}_width"] = int(windows[f"{element}_width"])
    return windows


def window_spec_for(
    description: dict, edge: str | None = None, max_n_fraction: float | None = None, allow_trans: bool | None = None
) -> WindowSpec:
    """The WindowSpec the model was trained with (widths and settings from model.json); given values override.

    A model.json without window settings (written before they were recorded) gets the
    WindowSpec defaults for edge, N filter and trans pairs, with a warning.
    """
    windows = recorded_windows(description)
    trained = {key: value for key, value in windows.items() if not key.endswith("_width")}
    settings = {key: value for key, value in asdict(WindowSpec()).items() if not key.endswith("_width")}
    if not trained:
        log.warning(
            "model.json records no window settings (trained before they were recorded): using edge=%s, "
            "max_n_fraction=%s, allow_trans=%s unless --edge, --max-n-fraction or --allow-trans say otherwise; "
            "match them to the training config.",
            settings["edge"],
            settings["max_n_fraction"],
            settings["allow_trans"],
        )
    settings.update({key: value for key, value in trained.items() if key in settings})
    for key, value in {"edge": edge, "max_n_fraction": max_n_fraction, "allow_trans": allow_trans}.items():
        if value is None:
            continue
        if trained and value != trained.get(key):
            log.warning("Scoring with %s=%s; the model was trained with %s=%s.", key, value, key, trained.get(key))
        settings[key] = value
    # Scoring reads element windows only: a run that also trained span models recorded
    # `input: span` (its windows stage dropped pairs without a span), which must not drop pairs here.
    settings["input"] = "elements"
    return WindowSpec(enhancer_width=windows["enhancer_width"], promoter_width=windows["promoter_width"], **settings)


def open_genome(genome_path: str | Path) -> Genome:
    """A Genome handle, or a GenomeError that names the path and what to give instead."""
    genome_path = Path(genome_path)
    if not genome_path.is_file():
        raise GenomeError(
            f"Genome FASTA not found: {genome_path}. Give the FASTA (plain or bgzip-compressed) of "
            "the build the pairs' coordinates refer to."
        )
    return Genome(genome_path)


def check_within_chromosomes(pairs: pd.DataFrame, sizes: dict[str, int], genome_name: str) -> None:
    """Fail when an element ends past the end of its chromosome: the pairs come from another build."""
    for element in ELEMENTS:
        lengths = pairs[f"{element}_chrom"].map(sizes).to_numpy()
        fail_at_first_bad_row(
            pairs,
            pairs[f"{element}_end"].to_numpy() > lengths,
            lambda row, element=element, lengths=lengths: (
                f"{element}_end {int(pairs[f'{element}_end'].iloc[row])} is past the end of "
                f"{pairs[f'{element}_chrom'].iloc[row]} ({int(lengths[row]):,} bp) in {genome_name}. "
                "The pairs were called on another build of the genome: give that build's FASTA."
            ),
            error=GenomeError,
        )


def place_pair_windows(pairs: pd.DataFrame, genome: Genome, spec: WindowSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Windows of every scorable pair (windows.tsv columns) and the pairs left unscored, with reasons."""
    genome_name = f"genome {genome.path}"
    check_chromosomes(pairs, genome.sizes, genome_name)
    check_within_chromosomes(pairs, genome.sizes, genome_name)
    unscored = {}
    if not spec.allow_trans:
        trans = (pairs["enhancer_chrom"] != pairs["promoter_chrom"]).to_numpy()
        unscored["trans_pair"] = pairs["pair_id"].to_numpy()[trans]
        pairs = pairs[~trans]
    if len(pairs):
        windows, report = make_windows(pairs, genome.sizes, spec, genome, drop_duplicates=False)
        unscored.update(report.dropped_ids)
    else:
        windows = pd.DataFrame(columns=["pair_id"])
    rows = [pd.DataFrame({"pair_id": ids, "reason": reason}) for reason, ids in unscored.items() if len(ids)]
    table = pd.concat(rows) if rows else pd.DataFrame({"pair_id": np.zeros(0, np.int64), "reason": ""})
    return windows, table


def packed_pairs(genome: Genome, windows: pd.DataFrame) -> PackedPairs:
    """The rows of a windows table encoded for the model: centred windows, no flank, in row order."""
    return PackedPairs(
        encode_windows(genome, windows, flank=0), windows["pair_id"].to_numpy(), windows["distance"].to_numpy()
    )


def score_windows(
    model: EPITransformer,
    genome: Genome,
    windows: pd.DataFrame,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
) -> pd.DataFrame:
    """`pair_id, score` for every row of a windows table: centred windows, no augmentation, as in evaluation."""
    device = torch.device(device)
    offsets = range(0, len(windows), CHUNK_PAIRS)
    ids, scores = [np.zeros(0, np.int64)], [np.zeros(0, np.float32)]
    for offset in progress(offsets, len(offsets), f"scoring {len(windows):,} pairs"):
        part_scores, _, part_ids = predict_split(
            model, packed_pairs(genome, windows.iloc[offset : offset + CHUNK_PAIRS]), batch_size, device
        )
        ids.append(part_ids)
        scores.append(part_scores)
    return pd.DataFrame({"pair_id": np.concatenate(ids), "score": np.concatenate(scores)})


def load_scoring_model(
    model_dir: str | Path,
    device: torch.device | str = "cpu",
    edge: str | None = None,
    max_n_fraction: float | None = None,
    allow_trans: bool | None = None,
    command: str = "epiformer predict",
) -> tuple[EPITransformer, WindowSpec]:
    """The model of a folder and the WindowSpec to score with (model.json's, with the given overrides), logged."""
    model, description = load_model_folder(model_dir, device, command)
    spec = window_spec_for(description, edge, max_n_fraction, allow_trans)
    log.info(
        "Model %s (%s attention): windows of %d bp (enhancer) and %d bp (promoter), edge=%s, max_n_fraction=%s, "
        "allow_trans=%s",
        model_dir,
        description["model"].get("attention"),
        spec.enhancer_width,
        spec.promoter_width,
        spec.edge,
        spec.max_n_fraction,
        spec.allow_trans,
    )
    return model, spec


def read_pairs_to_score(pairs_path: str | Path) -> pd.DataFrame:
    """The pairs of a TargetFinder CSV or BEDPE file, labels optional; PairsError when it is missing or malformed."""
    if not Path(pairs_path).is_file():
        raise PairsError(
            f"Pairs file not found: {pairs_path}. Give a TargetFinder CSV or BEDPE file of the pairs to "
            "score (--pairs)."
        )
    pairs = read_pairs(pairs_path, require_label=False)
    log.info("Read %d pairs (%s) from %s", len(pairs), pairs.attrs["format"], pairs_path)
    return pairs


def unscored_pair_lines(unscored: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """`pair_id, line, reason` of the pairs place_pair_windows left unscored, by pair_id (`line`: 1-based file line)."""
    unscored = unscored.assign(line=[int(pairs.attrs["header_lines"]) + pair_id + 1 for pair_id in unscored["pair_id"]])
    return unscored.sort_values("pair_id")[UNSCORED_COLUMNS]


def unscored_path_for(out_path: str | Path) -> Path:
    """`scores.tsv` -> `scores.unscored.tsv` beside it."""
    out_path = Path(out_path)
    return out_path.with_name(f"{out_path.name.removesuffix('.tsv')}.unscored.tsv")


def predict_pairs(
    model_dir: str | Path,
    genome_path: str | Path,
    pairs_path: str | Path,
    out_path: str | Path,
    unscored_path: str | Path | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    edge: str | None = None,
    max_n_fraction: float | None = None,
    allow_trans: bool | None = None,
) -> dict:
    """Score every pair of `pairs_path`; write the scores and the unscored pairs (see module docstring).

    `edge`, `max_n_fraction` and `allow_trans` override the settings the model was
    trained with (None keeps them). Nothing is written unless every check passes.
    Returns pairs_in, scored, unscored (counts by reason) and the two output paths.
    """
    unscored_path = Path(unscored_path) if unscored_path else unscored_path_for(out_path)
    model, spec = load_scoring_model(model_dir, device, edge, max_n_fraction, allow_trans)
    pairs = read_pairs_to_score(pairs_path)
    with open_genome(genome_path) as genome:
        windows, unscored = place_pair_windows(pairs, genome, spec)
        scores = score_windows(model, genome, windows, batch_size, device)
    unscored = unscored_pair_lines(unscored, pairs)
    atomic_write_text(out_path, scores.sort_values("pair_id").to_csv(sep="\t", index=False, float_format=SCORE_FORMAT))
    atomic_write_text(unscored_path, unscored.to_csv(sep="\t", index=False))
    counts = {str(reason): int(n) for reason, n in unscored["reason"].value_counts(sort=False).items()}
    log.info("Scored %d of %d pairs -> %s", len(scores), len(pairs), out_path)
    if counts:
        log.warning(
            "%d pair(s) could not be scored (%s); listed with their file lines in %s",
            len(unscored),
            ", ".join(f"{reason}: {n}" for reason, n in counts.items()),
            unscored_path,
        )
    return {
        "pairs_in": len(pairs),
        "scored": len(scores),
        "unscored": counts,
        "out": str(out_path),
        "unscored_path": str(unscored_path),
    }
