"""New candidate pairs made ready for a trained model: read, placed, encoded and scored.

`epiformer predict` and `epiformer variants` share these steps, so that a pair scores the
same in both and as in evaluation: the model's recorded window settings
(`data.windows.window_spec_for`), centred windows, no augmentation. An element model's pairs
are encoded and scored `CHUNK_PAIRS` at a time, so memory stays flat for inputs of any size;
a span model's spans are coordinates whose bases are read from the genome batch by batch,
batched by length within a budget of model tokens, as in evaluation.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from epiformer.data.encode import encode_windows
from epiformer.data.genome import Genome
from epiformer.data.pairs import PairsError, read_pairs
from epiformer.data.shards import PackedPairs
from epiformer.data.spans import spans_of_windows
from epiformer.data.windows import WindowSpec, window_spec_for
from epiformer.inference.trained_model import TrainedModel, load_trained_model, predict_split
from epiformer.io.runlog import progress
from epiformer.model.configs import SCORING_BATCH_SIZE, SCORING_TOKENS

log = logging.getLogger(__name__)
CHUNK_PAIRS = 4096  # pairs encoded and scored at a time (the workflow's default shard size)
UNSCORED_COLUMNS = ["pair_id", "line", "reason"]


def packed_pairs(genome: Genome, windows: pd.DataFrame) -> PackedPairs:
    """The rows of a windows table encoded for the model: centred windows, no flank, in row order."""
    return PackedPairs(
        encode_windows(genome, windows, flank=0), windows["pair_id"].to_numpy(), windows["distance"].to_numpy()
    )


def score_windows(
    model: TrainedModel,
    genome: Genome,
    windows: pd.DataFrame,
    batch_size: int = SCORING_BATCH_SIZE,
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


def score_spans(
    model: TrainedModel,
    genome: Genome,
    windows: pd.DataFrame,
    device: torch.device | str = "cpu",
    max_tokens: int = SCORING_TOKENS,
) -> pd.DataFrame:
    """`pair_id, score` for the span of every row of a windows table (a span model), in row order."""
    spans = spans_of_windows(windows, genome, list(genome.sizes))
    scores, _, ids = predict_split(model, spans, device=torch.device(device), max_tokens=max_tokens)
    return pd.DataFrame({"pair_id": ids, "score": scores})


def score_pairs(model, genome, windows, batch_size: int, device, max_tokens: int = SCORING_TOKENS) -> pd.DataFrame:
    """`pair_id, score` of every row of a windows table, by what the model reads: element windows or spans."""
    if model.config.reads_spans:
        return score_spans(model, genome, windows, device, max_tokens)
    return score_windows(model, genome, windows, batch_size, device)


def load_scoring_model(
    model_dir: str | Path,
    device: torch.device | str = "cpu",
    edge: str | None = None,
    max_n_fraction: float | None = None,
    allow_trans: bool | None = None,
    command: str | None = None,
) -> tuple[TrainedModel, WindowSpec]:
    """The model of a folder and the WindowSpec to score with (model.json's, with the given overrides), logged.

    `command` names a command that scores element-window models only: a span model is refused for it.
    """
    model, description = load_trained_model(model_dir, device, elements_only_for=command)
    spec = window_spec_for(description, edge, max_n_fraction, allow_trans)
    log.info(
        "Model %s (%s attention, reads %s): windows of %d bp (enhancer) and %d bp (promoter), edge=%s, "
        "max_n_fraction=%s, allow_trans=%s%s",
        model_dir,
        description["model"].get("attention"),
        "spans" if model.config.reads_spans else "element windows",
        spec.enhancer_width,
        spec.promoter_width,
        spec.edge,
        spec.max_n_fraction,
        spec.allow_trans,
        f", spans up to {spec.max_span:,} bp" if spec.max_span is not None else "",  # None: of any length
    )
    return model, spec


def read_pairs_to_score(pairs_path: str | Path, tss_annotation: str = "") -> pd.DataFrame:
    """The pairs of a TargetFinder CSV, BEDPE or CRISPR benchmark file, labels optional; PairsError if malformed.
    A CRISPR benchmark's TSSs come from `tss_annotation` when the model was trained so (`WindowSpec`)."""
    if not Path(pairs_path).is_file():
        raise PairsError(
            f"Pairs file not found: {pairs_path}. Give a TargetFinder CSV, BEDPE or CRISPR benchmark file of the "
            "pairs to score (--pairs)."
        )
    pairs = read_pairs(pairs_path, require_label=False, tss_annotation=tss_annotation)
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
