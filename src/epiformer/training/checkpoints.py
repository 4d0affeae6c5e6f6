"""Checkpoints of a training run, and the stop request that makes one.

The rolling checkpoint `{checkpoint_dir}/last.pt` holds the model, optimiser and scheduler
states, the epochs done, the best epoch so far and, mid-epoch, the batches done and every
process's RNG state. It is loaded only when its fingerprint (model and training settings,
the shards' checksums, the checkpoint format) matches the run's: a changed setting, or a
checkpoint an older epiformer wrote, starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import threading
from dataclasses import asdict
from pathlib import Path

import torch

from epiformer.io.files import atomic_write
from epiformer.model.configs import ModelConfig, TrainConfig

log = logging.getLogger(__name__)
CHECKPOINT_FORMAT = 2  # 2: the best epoch keeps its validation scores (`val_predictions.tsv` comes from them)


class StopRequest:
    """Turns SIGTERM / SIGUSR1 into a flag that the loop checks between optimiser steps.

    SLURM sends SIGTERM (or the signal asked for with `--signal`) before it pre-empts a job
    or when the time limit comes; the loop then checkpoints and exits instead of losing work.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1)

    def __init__(self):
        self.signal = 0

    def __enter__(self):
        # Handlers can only be set from the main thread; elsewhere, signals keep their defaults.
        in_main = threading.current_thread() is threading.main_thread()
        self._previous = {sig: signal.signal(sig, self._receive) for sig in self.SIGNALS} if in_main else {}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _receive(self, signum, frame) -> None:
        self.signal = signum


class TrainingInterrupted(SystemExit):
    """Raised after the checkpoint is written; exits the process with 128 + signal number."""


def checkpoint_path(checkpoint_dir: Path) -> Path:
    """The rolling checkpoint's file."""
    return checkpoint_dir / "last.pt"


def save_checkpoint(checkpoint_dir: Path, state: dict) -> None:
    """Write the rolling checkpoint atomically: a kill mid-write leaves the previous one."""
    atomic_write(checkpoint_path(checkpoint_dir), lambda temporary: torch.save(state, temporary))


def load_checkpoint(checkpoint_dir: Path, fingerprint: str) -> dict | None:
    """The rolling checkpoint if there is one made by this run's settings and data, else None."""
    path = checkpoint_path(checkpoint_dir)
    if not path.exists():
        return None
    state = torch.load(path, weights_only=True)
    if state.get("fingerprint") != fingerprint:
        log.warning("Ignoring checkpoint %s: it was made with other data or settings, or by an older epiformer.", path)
        return None
    return state


def run_fingerprint(
    model_config: ModelConfig, train_config: TrainConfig, manifest: dict, checkpoint_format: int = CHECKPOINT_FORMAT
) -> str:
    """SHA-256 of what decides a run's results and what its checkpoint holds: model and training settings, the
    shards' checksums, the checkpoint format."""
    settings = {k: v for k, v in asdict(train_config).items() if k != "checkpoint_minutes"}  # cannot change results
    parts = [model_config.to_dict(), settings, manifest["shards"]]
    if checkpoint_format > 1:  # format 1's fingerprints did not name their format
        parts.append({"checkpoint_format": checkpoint_format})
    text = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
