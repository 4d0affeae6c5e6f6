"""Scoring a model on the validation split during training: the scores each epoch is judged by
(`validation_scores`; the best epoch's are kept as the model's `val_predictions.tsv`) and the
loss, AUROC and AUPRC of its train_log.tsv row (`validation_metrics`).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.inference.trained_model import predict_split
from epiformer.model.configs import TrainConfig


def validation_metrics(scores: np.ndarray, labels: np.ndarray, source: np.ndarray) -> dict:
    """Validation loss, AUROC and AUPRC; pooled cell lines are each scored alone and averaged.

    Ranking the pairs of cell lines with different positive rates together would reward
    learning the cell line rather than the interaction.
    """
    parts = [source == value for value in np.unique(source)]
    return {
        "val_loss": binary_cross_entropy(scores, labels),
        "val_auroc": float(np.mean([roc_auc_score(labels[p], scores[p]) for p in parts])),
        "val_auprc": float(np.mean([average_precision_score(labels[p], scores[p]) for p in parts])),
    }


def validation_scores(model, val_data, train_config: TrainConfig, device) -> dict[str, torch.Tensor]:
    """The model's validation predictions (pair_id, label, score as float64), in the split's row order.

    Tensors, not arrays: the best epoch's go into the checkpoint, which loads with weights_only=True."""
    batch_size, max_tokens = 4 * train_config.batch_size, train_config.scoring_tokens
    scores, labels, ids = predict_split(model, val_data, batch_size, device, max_tokens)
    return {
        "pair_id": torch.from_numpy(ids.astype(np.int64)),
        "label": torch.from_numpy(labels.astype(np.int64)),
        "score": torch.from_numpy(scores.astype(np.float64)),
    }


def binary_cross_entropy(scores: np.ndarray, labels: np.ndarray) -> float:
    clipped = np.clip(scores, 1e-7, 1 - 1e-7)
    return float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
