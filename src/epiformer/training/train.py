"""Training: AdamW, warm-up + cosine schedule, class-weighted loss, best-on-validation.

The loop lives here; the steps it takes (each epoch's batches, the token budget's plan) in
`training.steps`, the validation scores each epoch is judged by in `training.validation`, and
what it leaves in `outdir` in `training.outputs`: `model.safetensors` (the weights of the epoch
with the best validation AUPRC), `model.json`, `train_log.tsv` (one row per epoch) and, for a
model of one cell line, `val_predictions.tsv`: the best epoch's validation scores, which
evaluation uses rather than score the validation split again
(`evaluation.evaluate.training_validation`).

A rolling checkpoint (model, optimiser, scheduler, RNG states, epoch, batch, best metric)
is kept in `checkpoint_dir`, which must lie outside the rule's declared outputs: Snakemake
deletes a failed job's outputs, and the checkpoint has to survive that so a re-run resumes.
It is written at the end of every epoch, every `checkpoint_minutes` within an epoch, and
when the job is told to stop (SIGTERM, or SIGUSR1 — what SLURM sends before pre-empting a
job or at its time limit); the process then exits with 128 + the signal number and the
next run (Snakemake `--retries`, a SLURM requeue, or by hand) continues from that batch.

Randomness: the weights come from `seed`; each epoch's order and augmentation from (seed,
epoch); dropout from (seed, epoch, process rank), reseeded at every epoch start. A resumed
run therefore replays exactly what an uninterrupted one does, with any number of processes.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from epiformer.data.batches import SpanBatches, batch_loader, check_shift
from epiformer.data.shards import load_split, shard_manifest
from epiformer.inference.devices import device_label, mixed_precision, select_device
from epiformer.io.model_description import read_description
from epiformer.io.runlog import log_files, progress, setup_logging
from epiformer.model.configs import ModelConfig, TrainConfig
from epiformer.model.transformer import EPITransformer, count_parameters, score_batch
from epiformer.training.checkpoints import (
    StopRequest,
    TrainingInterrupted,
    checkpoint_path,
    load_checkpoint,
    run_fingerprint,
    save_checkpoint,
)
from epiformer.training.distributed import agree, forward_stop_signals, free_port, gather, process_device
from epiformer.training.outputs import write_outputs
from epiformer.training.steps import budget_plan, epoch_batches
from epiformer.training.validation import validation_metrics, validation_scores

log = logging.getLogger(__name__)
EpochHook = Callable[[dict], bool | None]  # train_model's `on_epoch`: an epoch's row in, True to end training


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and PyTorch: the initial weights come from `seed`."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_dropout(seed: int, epoch: int, rank: int) -> None:
    """Dropout masks from (seed, epoch, rank): distinct per process, replayable after a resume."""
    torch.manual_seed(int(np.random.SeedSequence([seed, epoch, rank]).generate_state(1)[0]))


def learning_rate_factor(step: int, warmup: int, total: int) -> float:
    """The learning rate's multiplier at `step`: linear warm-up over `warmup` steps, then cosine decay to 0."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def should_stop_early(history: list[dict], best: dict, patience: int) -> bool:
    """Whether `patience` epochs (0: never) have passed without a better validation AUPRC."""
    return patience > 0 and bool(history) and history[-1]["epoch"] - best["epoch"] >= patience


def train_model(
    shard_dir: str | Path | list,
    model_config: ModelConfig,
    train_config: TrainConfig,
    outdir: str | Path,
    checkpoint_dir: str | Path,
    on_epoch: EpochHook | None = None,
) -> dict:
    """Train on the train split, select on validation, write the outputs; returns model.json's content.

    `shard_dir` is one cell line's shard folder, or a list of them: one model is then trained
    on all their train splits together and selected on all their validation splits.

    With `train_config.devices` > 1, that many processes train data-parallel (DDP: NCCL on
    GPUs, gloo on the CPU), each on its own slice of every global batch of `batch_size`.

    `on_epoch`, for studies that watch a run: called after each epoch this call trains, once it is
    validated and checkpointed, with a copy of its train_log.tsv row (`training.outputs.LOG_COLUMNS`: epoch, val_auroc,
    val_auprc, ...). A true return ends training there, as `patience` does: the outputs are
    written from the best epoch so far, and the checkpoint stays, so a re-run resumes after that
    epoch. With `devices` > 1 every process calls it on its own row (the same validation figures, its own
    timings; each on its own pickled copy: pass a module-level function), and training ends when any asks.
    """
    if train_config.max_shift is not None:  # here, before any process starts
        check_shift(train_config.max_shift, int(shard_manifest(shard_dir)["flank"]))
    if train_config.devices == 1:
        return _train(0, 1, shard_dir, model_config, train_config, Path(outdir), Path(checkpoint_dir), on_epoch)
    select_device(train_config.device)  # fail before spawning processes
    port = free_port()
    context = torch.multiprocessing.spawn(
        _distributed_worker,
        nprocs=train_config.devices,
        join=False,
        args=(
            train_config.devices,
            port,
            log_files(),
            shard_dir,
            model_config,
            train_config,
            Path(outdir),
            Path(checkpoint_dir),
            on_epoch,
        ),
    )
    with forward_stop_signals(context.processes):
        try:
            while not context.join():
                pass
        except torch.multiprocessing.ProcessExitedException as error:
            if error.exit_code in {128 + sig for sig in StopRequest.SIGNALS}:
                raise TrainingInterrupted(error.exit_code) from None
            raise
    return read_description(outdir)


def _distributed_worker(rank: int, world: int, port: int, log_paths: list[str], *args) -> None:
    # A spawned process starts with no logging set up: rank 0 writes its epoch and progress
    # lines to the job's log, the others only their warnings.
    setup_logging(log_paths[0] if log_paths else None, logging.INFO if rank == 0 else logging.WARNING, append=True)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = "nccl" if select_device(args[2].device).type == "cuda" else "gloo"
    torch.distributed.init_process_group(backend, rank=rank, world_size=world)
    try:
        _train(rank, world, *args)
    finally:
        torch.distributed.destroy_process_group()


def _optimisation(model, train_config: TrainConfig, total: int):
    """AdamW with linear warm-up then cosine decay over all `total` steps the run will take."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=train_config.learning_rate, weight_decay=train_config.weight_decay
    )
    warmup = max(1, int(total * train_config.warmup_fraction))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: learning_rate_factor(s, warmup, total))
    return optimizer, scheduler


@dataclass
class _Run:
    """What one process of a training run holds; rank 0 logs, checkpoints and writes outputs."""

    rank: int
    world: int
    model: torch.nn.Module
    step_model: torch.nn.Module  # what the steps call: DDP- and/or compile-wrapped `model`
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    positive_weight: torch.Tensor  # [sources]: weight of a positive pair of each source; negatives weigh 1
    config: TrainConfig
    device: torch.device
    device_name: str  # as train_log.tsv and model.json record it, e.g. "cuda x 4"
    checkpoint_dir: Path
    fingerprint: str
    plan: list[np.ndarray]  # `budget_plan`: the tokens of each step each epoch takes
    label: str = ""  # what progress lines call this training (`training_label`): two at once stay apart


def training_label(outdir: Path) -> str:
    """How a training's progress lines name it: its output folder below results/ (cell line, model, replicate),
    else the folder's name."""
    parts = Path(outdir).parts
    if "results" in parts[:-1]:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("results") + 1 :])
    return Path(outdir).name


def _train_epoch(
    run: _Run, train_data, epoch: int, partial: dict | None, stop: StopRequest, save, seconds_left: float
) -> tuple[float, int, int, int]:
    """One pass over this process's batches, from a mid-epoch checkpoint when there is one.

    Returns the mean training loss over all processes, the batches done (all of them, unless
    the token budget's plan or the time budget `seconds_left` ends the epoch first), this
    process's batches, and the model tokens of the batches done, all processes together.
    `save(partial)` writes a mid-epoch checkpoint; on a stop request it is written before
    TrainingInterrupted is raised.
    """
    config = run.config
    batches = epoch_batches(train_data, run.model.config, config, epoch, run.rank, run.world)
    planned = len(run.plan[epoch - 1])  # fewer than len(batches) where train.max_tokens ends the run
    start = partial["batches_done"] if partial else 0
    losses = [torch.tensor(value) for value in partial["losses"]] if partial else []
    seed_dropout(config.seed, epoch, run.rank)
    if partial:
        torch.set_rng_state(partial["rng"][run.rank])
    run.model.train()
    loader = batch_loader(torch.utils.data.Subset(batches, range(start, len(batches))), config.loader_workers)
    description = f"{run.label} epoch {epoch}/{config.epochs}".strip() if run.rank == 0 else ""
    last_saved = started = time.monotonic()
    done = len(batches)
    for index, batch in enumerate(progress(loader, planned - start, description), start=start):
        losses.append(_step(run, batch))
        if index + 1 == planned < len(batches):  # the token budget: the same step on every machine
            done = planned
            break
        minutes = (time.monotonic() - last_saved) / 60
        signum, due, spent = agree(
            stop.signal,
            0 < config.checkpoint_minutes <= minutes,
            config.max_minutes > 0 and time.monotonic() - started >= seconds_left,
            world=run.world,
            device=run.device,
        )
        if spent and not signum and index + 1 < len(batches):  # a signal checkpoints and exits first
            done = index + 1
            break
        if (due or signum) and index + 1 < len(batches):
            save(
                {
                    "epoch": epoch,
                    "batches_done": index + 1,
                    "losses": [float(v) for v in losses],
                    "rng": gather(torch.get_rng_state(), run.world),
                }
            )
            last_saved = time.monotonic()
        if signum and index + 1 < len(batches):  # at an epoch's last batch, finish the epoch and its checkpoint first
            if run.rank == 0:
                log.warning(
                    "Stopped by signal %d at epoch %d, batch %d of %d; checkpoint in %s; run again to resume.",
                    signum,
                    epoch,
                    index + 1,
                    len(batches),
                    run.checkpoint_dir,
                )
            raise TrainingInterrupted(128 + signum)
    mean = torch.stack([value.to(run.device) for value in losses]).mean()
    if run.world > 1:
        torch.distributed.all_reduce(mean, op=torch.distributed.ReduceOp.AVG)
    return float(mean), done, len(batches), int(run.plan[epoch - 1][:done].sum())


def _step(run: _Run, batch: dict) -> torch.Tensor:
    """One optimiser step; returns the batch loss (detached)."""
    with mixed_precision(run.device):
        logits = score_batch(run.step_model, run.model.config, batch, run.device)
    labels = batch["label"].to(run.device)
    weights = torch.where(labels > 0, run.positive_weight[batch["source"].to(run.device)], 1.0)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels, weight=weights)
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()  # under DDP the gradients of all processes are averaged here
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.config.grad_clip)
    run.optimizer.step()
    run.scheduler.step()
    return loss.detach()


def positive_weights(data) -> torch.Tensor:
    """float [sources]: negatives / positives of each source's training pairs.

    With it, positives and negatives weigh the same in each source (cell line): the loss
    is balanced, and a model pooled over cell lines of different positive rates gains
    nothing by learning which cell line a sequence comes from.
    """
    sources = int(data.source.max()) + 1 if len(data.source) else 1
    positives = np.bincount(data.source, weights=data.label, minlength=sources)
    pairs = np.bincount(data.source, minlength=sources)
    return torch.tensor((pairs - positives) / np.maximum(positives, 1.0), dtype=torch.float32)


def _epoch_row(
    run: _Run, val_scores: dict, val_data, epoch: int, train_loss: float, seconds: float, tokens: int, fraction: float
) -> dict:
    """One train_log.tsv row: training loss, validation metrics, speed, and how much of the epoch ran."""
    return {
        "epoch": epoch,
        "train_loss": train_loss,
        **validation_metrics(val_scores["score"].numpy(), val_scores["label"].numpy(), val_data.source),
        "learning_rate": run.scheduler.get_last_lr()[0],
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "tokens": tokens,
        "device": run.device_name,
        "epoch_fraction": fraction,
    }


@dataclass
class _Progress:
    """Where a run stands: a row per epoch done, the best epoch so far (its weights on the CPU), a partial epoch."""

    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=lambda: {"auprc": -1.0, "epoch": 0, "weights": None})
    partial: dict | None = None  # a mid-epoch checkpoint's batches done, losses, RNG states and seconds


def _train(
    rank: int,
    world: int,
    shard_dir,
    model_config: ModelConfig,
    train_config: TrainConfig,
    outdir: Path,
    checkpoint_dir: Path,
    on_epoch: EpochHook | None,
) -> dict:
    """One process of a (possibly distributed) run; rank 0 logs, checkpoints and writes outputs."""
    manifest = shard_manifest(shard_dir)
    train_data, val_data = load_split(shard_dir, "train"), load_split(shard_dir, "val")
    run = _start_run(rank, world, model_config, train_config, train_data, checkpoint_dir, manifest)
    run.label = training_label(outdir)
    progress = _resume(run)
    budget_reached = _run_epochs(run, progress, train_data, val_data, on_epoch)
    if rank != 0:
        return {}
    return write_outputs(
        outdir, progress.best, progress.history, model_config, train_config, manifest, run.device_name, budget_reached
    )


def _start_run(rank, world, model_config: ModelConfig, train_config: TrainConfig, train_data, checkpoint_dir, manifest):
    """The model (the same initial weights in every process), its optimiser and schedule, on this process's device."""
    torch.set_num_threads(train_config.threads)
    device = process_device(train_config, rank, world)
    seed_everything(train_config.seed)
    model = EPITransformer(model_config).to(device)
    wrapped = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    plan = budget_plan(train_data, model_config, train_config, world)
    optimizer, scheduler = _optimisation(model, train_config, sum(len(steps) for steps in plan))
    run = _Run(
        rank=rank,
        world=world,
        model=model,
        step_model=torch.compile(wrapped) if train_config.compile else wrapped,
        optimizer=optimizer,
        scheduler=scheduler,
        positive_weight=positive_weights(train_data).to(device),
        config=train_config,
        device=device,
        device_name=device_label(device, world),
        checkpoint_dir=checkpoint_dir,
        fingerprint=run_fingerprint(model_config, train_config, manifest),
        plan=plan,
    )
    if rank == 0:
        log.info(
            "Model %s attention, %d parameters, %s, %s",
            model_config.attention,
            count_parameters(model),
            run.device_name,
            "bf16 autocast" if device.type == "cuda" else "float32",
        )
        if model_config.reads_spans:
            log_pairs_per_step(epoch_batches(train_data, model_config, train_config, 1, rank, world))
    return run


def log_pairs_per_step(batches: SpanBatches) -> None:
    """Log how many pairs a step of span batches holds (long spans fill a batch alone).

    A step of one pair has one label, and AdamW moves every weight about as far for it whatever its class
    weight: the scale demo's steps hold a median of one pair, and its runs that missed the borders ended
    scoring every pair alike (docs/demo_scale.md, "Runs that miss"). Element-window batches hold
    `batch_size` pairs.
    """
    if not len(batches):
        return
    pairs = np.array([len(rows) for rows in batches.batches])
    log.info("%d steps an epoch, %.1f pairs a step (median %g)", len(pairs), pairs.mean(), np.median(pairs))


def _resume(run: _Run) -> _Progress:
    """The run's progress from its checkpoint (model, optimiser and schedule restored), or a fresh start."""
    state = load_checkpoint(run.checkpoint_dir, run.fingerprint)
    if state is None:
        return _Progress()
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    progress = _Progress(state["history"], state["best"], state.get("partial"))
    if run.rank == 0:
        partial = progress.partial
        where = (
            f"epoch {partial['epoch']}, batch {partial['batches_done']}" if partial else f"epoch {state['epoch'] + 1}"
        )
        log.info("Resuming from %s at %s", checkpoint_path(run.checkpoint_dir), where)
    return progress


def _save(run: _Run, progress: _Progress, partial_epoch: dict | None) -> None:
    """The rolling checkpoint, written by rank 0: after a whole epoch (`partial_epoch` None) or within one."""
    if run.rank != 0:
        return
    state = {
        "fingerprint": run.fingerprint,
        "epoch": len(progress.history),
        "partial": partial_epoch,
        "model": run.model.state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "history": progress.history,
        "best": progress.best,
    }
    save_checkpoint(run.checkpoint_dir, state)


def _run_epochs(run: _Run, progress: _Progress, train_data, val_data, on_epoch: EpochHook | None) -> bool:
    """Train and validate epoch by epoch until the last, an early stop, the time budget or `on_epoch` asking to
    stop (`train_model`); True if the time budget ended it (a token budget's end is in the plan: `budget_plan`).

    Every process validates the same weights, so all agree on the history and on stopping.
    """
    config = run.config
    budget = config.max_minutes * 60
    with StopRequest() as stop:
        for epoch in range(len(progress.history) + 1, len(run.plan) + 1):
            partial = progress.partial
            spent = sum(row["seconds"] for row in progress.history) + (partial["seconds"] if partial else 0.0)
            reason = _reason_to_stop(run, progress, epoch, bool(budget) and spent >= budget)
            if reason:
                return reason == "budget"
            started = time.perf_counter() - (partial["seconds"] if partial else 0.0)

            def save_partial(state: dict, started: float = started) -> None:
                _save(run, progress, {**state, "seconds": time.perf_counter() - started})

            train_loss, done, batches, tokens = _train_epoch(
                run, train_data, epoch, partial, stop, save_partial, budget - spent
            )
            progress.partial = None
            seconds = time.perf_counter() - started  # training only: validation is outside the budget
            scores = validation_scores(run.model, val_data, run.config, run.device)
            row = _epoch_row(run, scores, val_data, epoch, train_loss, seconds, tokens, done / batches)
            _record_epoch(run, progress, row, scores)
            asked_to_stop = on_epoch is not None and bool(on_epoch(dict(row)))
            # each process times its own row, so their hooks may answer differently: any one stops them all
            _, asked_to_stop = agree(0, asked_to_stop, world=run.world, device=run.device)
            if done == len(run.plan[epoch - 1]) < batches:
                if run.rank == 0:
                    log.info("Token budget (train.max_tokens %d) reached in epoch %d.", config.max_tokens, epoch)
                return False
            if done < batches:
                if run.rank == 0:
                    log.warning(
                        "Time budget (train.max_minutes %g) spent in epoch %d after %d of %d batches (%.0f s); "
                        "a whole epoch would take about %.1f minutes at this pace. Kept the best epoch so far.",
                        config.max_minutes,
                        epoch,
                        done,
                        batches,
                        row["seconds"],
                        row["seconds"] * batches / done / 60,
                    )
                return True
            if asked_to_stop:
                if run.rank == 0:
                    log.info("Stopped after epoch %d: on_epoch asked to.", epoch)
                return False
    return False


def _reason_to_stop(run: _Run, progress: _Progress, epoch: int, budget_spent: bool) -> str | None:
    """Why the run ends before `epoch`: "patience" exhausted, or the time "budget" spent (agreed by all processes)."""
    if should_stop_early(progress.history, progress.best, run.config.patience):
        if run.rank == 0:
            log.info(
                "Early stop: no better validation AUPRC since epoch %d (patience %d)",
                progress.best["epoch"],
                run.config.patience,
            )
        return "patience"
    # Agreed: each process times itself, and all must leave the loop together.
    _, budget_spent = agree(0, budget_spent, world=run.world, device=run.device)
    if budget_spent:
        if run.rank == 0:
            log.info("Time budget (train.max_minutes %g) spent after epoch %d.", run.config.max_minutes, epoch - 1)
        return "budget"
    return None


def _record_epoch(run: _Run, progress: _Progress, row: dict, val_scores: dict) -> None:
    """Add an epoch's row; keep its weights and validation scores when its AUPRC is the best so far; log; checkpoint."""
    progress.history.append(row)
    if row["val_auprc"] > progress.best["auprc"]:
        weights = {key: value.detach().cpu().clone() for key, value in run.model.state_dict().items()}
        progress.best = {"auprc": row["val_auprc"], "epoch": row["epoch"], "weights": weights, "val_scores": val_scores}
    if run.rank == 0:
        log.info(
            "epoch %d: " + ", ".join(f"{k} %s" for k in list(row)[1:]), row["epoch"], *_fmt(list(row.values())[1:])
        )
    _save(run, progress, None)


def _fmt(values) -> list[str]:
    return [f"{v:.4g}" if isinstance(v, float) else str(v) for v in values]
