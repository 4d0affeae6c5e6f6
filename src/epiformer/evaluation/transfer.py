"""Cross-cell-line transfer: every trained model scored on every cell line's test split.

`results/transfer/{model}.tsv` has one row per (train_cell, test_cell): AUROC, AUPRC and
the number of test pairs. All cell lines hold out the same chromosomes, so no test pair's
enhancer chromosome was seen in training by any model. The diagonal equals each model's
own `metrics.json`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.constants import SCORE_FORMAT
from epiformer.data.shards import load_split, shard_manifest, window_widths
from epiformer.inference.devices import select_device
from epiformer.inference.trained_model import load_trained_model, predict_split
from epiformer.io.files import atomic_write_text
from epiformer.model.configs import SCORING_BATCH_SIZE, SCORING_TOKENS


def check_same_widths(description: dict, shard_dir: Path, model_dir: Path) -> None:
    """Fail when a cell line's shards hold windows of other widths than the model was trained on."""
    widths = window_widths(shard_manifest(shard_dir))
    if widths != window_widths(description):
        raise ValueError(
            f"{model_dir} was trained on windows {window_widths(description)}, but {shard_dir} holds "
            f"{widths}: transfer needs the same window widths for every cell line."
        )


def transfer_table(
    model_dirs: dict[str, Path],
    shard_dirs: dict[str, Path],
    batch_size: int = SCORING_BATCH_SIZE,
    max_tokens: int = SCORING_TOKENS,
    device: str = "cpu",
) -> pd.DataFrame:
    """AUROC/AUPRC of the model trained on each cell line (keys of `model_dirs`) on each test split.

    Window pairs are scored `batch_size` at a time, spans in batches of at most `max_tokens` tokens,
    on `device` (cpu, cuda or auto).
    """
    device = select_device(device)
    rows = []
    for train_cell, model_dir in model_dirs.items():
        model, description = load_trained_model(model_dir, device)
        for test_cell, shard_dir in shard_dirs.items():
            check_same_widths(description, Path(shard_dir), Path(model_dir))
            test = load_split(shard_dir, "test")
            scores, labels, _ = predict_split(model, test, batch_size, device, max_tokens)
            rows.append(
                {
                    "train_cell": train_cell,
                    "test_cell": test_cell,
                    "auroc": roc_auc_score(labels, scores),
                    "auprc": average_precision_score(labels, scores),
                    "n_test": len(labels),
                    "positives": int(labels.sum()),
                }
            )
    return pd.DataFrame(rows)


def write_transfer(
    model_dirs: dict[str, Path],
    shard_dirs: dict[str, Path],
    out_tsv: str | Path,
    max_tokens: int = SCORING_TOKENS,
    device: str = "cpu",
) -> pd.DataFrame:
    """The transfer table (module docstring), written atomically to `out_tsv`."""
    table = transfer_table(model_dirs, shard_dirs, max_tokens=max_tokens, device=device)
    atomic_write_text(Path(out_tsv), table.to_csv(sep="\t", index=False, float_format=SCORE_FORMAT))
    return table
