"""Data-parallel training processes (DDP): ports, devices, signals, and the agreements they need.

Every process must take the same decisions at the same step (checkpoint, stop, leave the
loop), or the others wait forever in a collective: `agree` and `gather` are how they do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket

import torch

from epiformer.inference.devices import select_device
from epiformer.model.configs import TrainConfig
from epiformer.training.checkpoints import StopRequest


@contextlib.contextmanager
def forward_stop_signals(processes):
    """A stop signal sent to the launching process reaches the training processes."""

    def forward(signum, frame):
        for process in processes:
            if process.is_alive():
                os.kill(process.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in StopRequest.SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_device(train_config: TrainConfig, rank: int, world: int) -> torch.device:
    """This process's device: with several processes on CUDA, the GPU of its rank."""
    device = select_device(train_config.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    return device


def agree(signum: int, *flags: bool, world: int, device: torch.device) -> tuple:
    """All processes must checkpoint and stop at the same step, or the others wait forever.

    Returns the largest signal number and each flag as set in any process.
    """
    if world == 1:
        return (signum, *flags)
    values = torch.tensor([signum, *map(int, flags)], device=device)  # NCCL reduces only GPU tensors
    torch.distributed.all_reduce(values, op=torch.distributed.ReduceOp.MAX)
    return (int(values[0]), *map(bool, values[1:].tolist()))


def gather(value, world: int) -> list:
    """`value` from every process, in rank order (all processes must call this)."""
    if world == 1:
        return [value]
    values = [None] * world
    torch.distributed.all_gather_object(values, value)
    return values
