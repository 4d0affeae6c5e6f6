"""Where a model runs: the device, and the precision it computes in there."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)


def select_device(name: str) -> torch.device:
    """The torch device for `name` (auto, cpu, cuda); `auto` picks CUDA when present and says loudly when it falls
    back to the CPU."""
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "train.device is 'cuda' but no CUDA GPU is visible. Use 'auto' or 'cpu', or run on a GPU node."
        )
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        log.warning("No CUDA GPU found: running on the CPU (train.device: auto). This is slow for real data sets.")
        return torch.device("cpu")
    return torch.device(name)


def device_label(device: torch.device, processes: int = 1) -> str:
    """How train_log.tsv and model.json name where a model trained: "cpu", "cuda:0", "cuda x 4" (data-parallel)."""
    return f"{device.type} x {processes}" if processes > 1 else str(device)


def labelled_device_type(label: str) -> str:
    """The kind of device (cpu, cuda) a `device_label` names."""
    return label.partition(" ")[0].partition(":")[0]


def mixed_precision(device: torch.device):
    """bf16 autocast on CUDA; float32 on the CPU, where bf16 matmuls run ~100x slower without bf16 units."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
