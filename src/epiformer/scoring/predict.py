"""Scoring new enhancer-promoter pairs with a trained model (`epiformer predict`).

Inputs: a model folder (`results/{cell}/{model}`: `model.json` + `model.safetensors`), a
genome FASTA (any build; an index `.fai` is made beside it if missing) and a pairs file,
TargetFinder CSV, BEDPE or CRISPR benchmark (`epiformer.data.pairs`), with or without labels.

Element-window models and span models alike (a span model reads everything from the first
element window to the second: `data.spans`). The workflow's own code does every step, so a
pair scores here as it does in evaluation:
`data.windows.place_pair_windows` places windows with the widths and settings recorded in
`model.json` (edge handling, N filter, trans pairs), `data.encode.encode_windows` encodes
them, and `inference.trained_model.predict_split` batches them through
`data.batches.PairBatches`: centred windows, no augmentation (`scoring.new_pairs`). Pairs are
encoded and scored `CHUNK_PAIRS` at a time, so memory stays flat for inputs of any size.

Outputs, each written atomically:
- scores TSV: `pair_id, score` for every scored pair, by pair_id. `pair_id` is the 0-based
  index of the pair among the file's data rows, as everywhere in the workflow; `score` is
  the predicted probability of interaction (float32, written exactly: `constants.SCORE_FORMAT`).
  Exact duplicate rows are scored, each under its own pair_id.
- unscored TSV: `pair_id, line, reason` for every pair that could not be scored (`line` is
  the 1-based line of the pairs file); only a header when every pair was scored. Reasons
  are the windows stage's (`{enhancer,promoter}_window_off_chromosome`,
  `{enhancer,promoter}_window_mostly_n`, and for a span model `span_longer_than_max_span`,
  a span longer than the model's `windows.max_span`) and `trans_pair` (elements on different
  chromosomes, for a model trained without `windows.allow_trans`; a span model never scores them).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from epiformer.constants import SCORE_FORMAT
from epiformer.data.genome import Genome
from epiformer.data.windows import place_pair_windows
from epiformer.io.files import atomic_write_text
from epiformer.model.configs import SCORING_BATCH_SIZE
from epiformer.scoring.new_pairs import (
    load_scoring_model,
    read_pairs_to_score,
    score_pairs,
    unscored_pair_lines,
    unscored_path_for,
)

log = logging.getLogger(__name__)


def predict_pairs(
    model_dir: str | Path,
    genome_path: str | Path,
    pairs_path: str | Path,
    out_path: str | Path,
    unscored_path: str | Path | None = None,
    batch_size: int = SCORING_BATCH_SIZE,
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
    pairs = read_pairs_to_score(pairs_path, spec.tss_annotation)
    with Genome(genome_path) as genome:
        windows, unscored = place_pair_windows(pairs, genome, spec)
        scores = score_pairs(model, genome, windows, batch_size, device)
    unscored = unscored_pair_lines(unscored, pairs)
    atomic_write_text(out_path, scores.sort_values("pair_id").to_csv(sep="\t", index=False, float_format=SCORE_FORMAT))
    atomic_write_text(unscored_path, unscored.to_csv(sep="\t", index=False))
    counts = {str(reason): int(n) for reason, n in unscored["reason"].value_counts(sort=False).items()}
    pairs_in = len(scores) + len(unscored)  # every data row: rows read_pairs set aside are among the unscored
    log.info("Scored %d of %d pairs -> %s", len(scores), pairs_in, out_path)
    if counts:
        log.warning(
            "%d pair(s) could not be scored (%s); listed with their file lines in %s",
            len(unscored),
            ", ".join(f"{reason}: {n}" for reason, n in counts.items()),
            unscored_path,
        )
    return {
        "pairs_in": pairs_in,
        "scored": len(scores),
        "unscored": counts,
        "out": str(out_path),
        "unscored_path": str(unscored_path),
    }
