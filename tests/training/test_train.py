import dataclasses
import json
import logging
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from sklearn.metrics import average_precision_score, roc_auc_score

from epiformer.data.batches import SpanBatches
from epiformer.data.encode import encode_shards
from epiformer.data.genome import Genome
from epiformer.data.pairs import read_pairs
from epiformer.data.shards import load_split, shard_manifest
from epiformer.data.splits import SplitSpec, assign_splits
from epiformer.data.windows import WindowSpec, make_windows
from epiformer.inference.trained_model import load_trained_model
from epiformer.io.files import sha256_file
from epiformer.io.runlog import setup_logging
from epiformer.model.transformer import ModelConfig
from epiformer.training.checkpoints import run_fingerprint
from epiformer.training.train import (
    TrainConfig,
    log_pairs_per_step,
    positive_weights,
    train_model,
    training_label,
)
from epiformer.training.validation import validation_metrics
from tests.helpers import encode_spans_of_fasta

TINY_MODEL = ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32, patch_size=4, kernel_size=8, dropout=0.1)


@pytest.fixture(scope="module")
def shard_dir(tiny_demo, tmp_path_factory):
    pairs = read_pairs(tiny_demo["demo_a"])
    windows, _ = make_windows(pairs, Genome(tiny_demo["genome"]).sizes, WindowSpec(64, 48))
    windows = assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
    out = tmp_path_factory.mktemp("shards")
    encode_shards(windows, tiny_demo["genome"], out, flank=4, shard_size=64)
    return out


def train_config(**overrides):
    return TrainConfig(**{"epochs": 3, "batch_size": 16, "learning_rate": 3e-3, "max_shift": 4, **overrides})


def test_training_writes_a_model_that_loads_and_a_log_per_epoch(shard_dir, tmp_path):
    description = train_model(shard_dir, TINY_MODEL, train_config(), tmp_path / "out", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "out" / "train_log.tsv", sep="\t")
    assert log["epoch"].tolist() == [1, 2, 3]
    assert log["val_auroc"].between(0, 1).all() and (log["tokens_per_s"] > 0).all()
    saved = json.loads((tmp_path / "out" / "model.json").read_text())
    assert saved == json.loads(json.dumps(description))
    assert (saved["windows"]["enhancer_width"], saved["windows"]["promoter_width"]) == (64, 48)
    assert saved["model"]["patch_size"] == 4
    assert saved["best_val_auprc"] == pytest.approx(log["val_auprc"].max())
    model, _ = load_trained_model(tmp_path / "out")
    logits = model(torch.zeros(2, 64, 4), torch.zeros(2, 48, 4))
    assert logits.shape == (2,)


def test_training_keeps_the_kept_epochs_validation_scores(shard_dir, tmp_path):
    from epiformer.inference.trained_model import predict_split

    train_model(shard_dir, TINY_MODEL, train_config(epochs=3), tmp_path / "out", tmp_path / "ckpt")
    kept = pd.read_csv(tmp_path / "out" / "val_predictions.tsv", sep="\t")
    saved = json.loads((tmp_path / "out" / "model.json").read_text())
    log = pd.read_csv(tmp_path / "out" / "train_log.tsv", sep="\t")
    val = load_split(shard_dir, "val")
    assert list(kept.columns) == ["pair_id", "label", "score"]
    assert kept["pair_id"].tolist() == sorted(val.pair_id.tolist())  # every validation pair once
    # The kept epoch's scores: its logged AUPRC recomputed from the file.
    best_row = log.set_index("epoch").loc[saved["best_epoch"]]
    assert average_precision_score(kept["label"], kept["score"]) == pytest.approx(best_row["val_auprc"], abs=1e-12)
    # And the saved weights' scores, scored anew in batches of another size.
    model, _ = load_trained_model(tmp_path / "out")
    scores, labels, ids = predict_split(model, val, 40)
    by_id = kept.set_index("pair_id").loc[ids]
    np.testing.assert_allclose(by_id["score"], scores, atol=1e-6, rtol=0)
    assert by_id["label"].tolist() == labels.tolist()
    assert saved["val_predictions_sha256"] == sha256_file(tmp_path / "out" / "val_predictions.tsv")


def test_a_checkpoint_an_older_epiformer_wrote_is_ignored_and_the_run_starts_afresh(shard_dir, tmp_path, caplog):
    config = train_config(epochs=2)
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "first", tmp_path / "ckpt")
    checkpoint = tmp_path / "ckpt" / "last.pt"
    state = torch.load(checkpoint, weights_only=True)
    del state["best"]["val_scores"]  # as format 1 wrote it: no validation scores kept
    state["model"] = {name: torch.zeros_like(value) for name, value in state["model"].items()}  # not the kept weights
    state["fingerprint"] = run_fingerprint(TINY_MODEL, config, shard_manifest(shard_dir), checkpoint_format=1)
    torch.save(state, checkpoint)
    with caplog.at_level(logging.WARNING, logger="epiformer.training.checkpoints"):
        train_model(shard_dir, TINY_MODEL, config, tmp_path / "again", tmp_path / "ckpt")
    assert "Ignoring checkpoint" in caplog.text and "older epiformer" in caplog.text
    first, again = (load_file(str(tmp_path / run / "model.safetensors")) for run in ("first", "again"))
    assert all(torch.equal(first[name], again[name]) for name in first)  # trained again, from the same seed
    kept = (pd.read_csv(tmp_path / run / "val_predictions.tsv", sep="\t") for run in ("first", "again"))
    pd.testing.assert_frame_equal(*kept)


@pytest.mark.parametrize("attention", ["linear", "softmax", "gated_deltanet"])
def test_same_seed_gives_identical_weights(shard_dir, tmp_path, attention):
    model = dataclasses.replace(TINY_MODEL, attention=attention)  # dropout 0.1: it draws from the seeded generator too
    for run in ("a", "b"):
        train_model(shard_dir, model, train_config(epochs=2), tmp_path / run, tmp_path / f"ckpt-{run}")
    a, b = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert sorted(a) == sorted(b) and len(a) > 10 and all(torch.equal(a[k], b[k]) for k in a)


KILLED_RUN = """
import os, sys
import epiformer.training.train as train
from epiformer.model.transformer import ModelConfig
from epiformer.training.train import TrainConfig
real_save = train.save_checkpoint
def save_then_die(directory, state):
    real_save(directory, state)
    os._exit(137)  # killed right after the first epoch's checkpoint
train.save_checkpoint = save_then_die
model, config = ModelConfig(**{model}), TrainConfig(**{config})
train.train_model(sys.argv[1], model, config, sys.argv[2], sys.argv[3])
"""


def test_a_killed_training_resumes_to_the_same_result(shard_dir, tmp_path):
    config = train_config(epochs=3)
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "straight", tmp_path / "ckpt-straight")
    script = KILLED_RUN.format(model=TINY_MODEL.to_dict(), config=vars(config))
    killed = subprocess.run(
        [sys.executable, "-c", script, str(shard_dir), str(tmp_path / "resumed"), str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == 137, killed.stderr
    assert not (tmp_path / "resumed" / "model.safetensors").exists()
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "resumed", tmp_path / "ckpt")
    straight = load_file(str(tmp_path / "straight" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert sorted(straight) == sorted(resumed) and len(straight) > 10
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    log = pd.read_csv(tmp_path / "resumed" / "train_log.tsv", sep="\t")
    assert log["epoch"].tolist() == [1, 2, 3]


def test_cuda_request_without_a_gpu_fails_at_once(shard_dir, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    for devices in (1, 2):
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            train_model(
                shard_dir, TINY_MODEL, train_config(device="cuda", devices=devices), tmp_path / "out", tmp_path / "ckpt"
            )
    assert not (tmp_path / "out").exists() and not (tmp_path / "ckpt").exists()


def test_training_reduces_the_loss(shard_dir, tmp_path):
    """Real optimisation on the tiny demo; whether the model reaches the oracle is the full demo's test."""
    config = train_config(epochs=8, learning_rate=5e-3)
    description = train_model(
        shard_dir,
        ModelConfig(d_model=32, n_layers=1, n_heads=4, d_ff=64, patch_size=4, kernel_size=12, dropout=0.0),
        config,
        tmp_path / "o",
        tmp_path / "c",
    )
    log = pd.read_csv(tmp_path / "o" / "train_log.tsv", sep="\t")
    assert log["train_loss"].iloc[-1] < log["train_loss"].iloc[0]
    best = log["val_auprc"].idxmax()  # the epoch kept is the one with the best validation AUPRC
    assert description["best_epoch"] == log["epoch"][best]
    assert description["best_val_auprc"] == pytest.approx(log["val_auprc"][best], rel=1e-9)


def test_compiled_training_saves_plain_weights(shard_dir, tmp_path):
    train_model(shard_dir, TINY_MODEL, train_config(epochs=1, compile=True), tmp_path / "out", tmp_path / "ckpt")
    weights = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert not any(name.startswith("_orig_mod") for name in weights)
    load_trained_model(tmp_path / "out")


def test_early_stopping_ends_after_patience_epochs_without_improvement(shard_dir, tmp_path):
    config = train_config(epochs=30, learning_rate=1e-7, patience=2)  # too small a rate to improve for long
    description = train_model(shard_dir, TINY_MODEL, config, tmp_path / "out", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "out" / "train_log.tsv", sep="\t")
    assert len(log) < 30 and len(log) == description["best_epoch"] + 2
    assert log["val_auprc"].iloc[-2:].max() <= log["val_auprc"].iloc[description["best_epoch"] - 1]


def test_on_epoch_sees_every_epochs_row_and_can_end_training(shard_dir, tmp_path):
    rows = []
    train_model(shard_dir, TINY_MODEL, train_config(epochs=2), tmp_path / "all", tmp_path / "c1", on_epoch=rows.append)
    log = pd.read_csv(tmp_path / "all" / "train_log.tsv", sep="\t")
    assert [row["epoch"] for row in rows] == [1, 2]
    assert [row["val_auroc"] for row in rows] == pytest.approx(log["val_auroc"].tolist())

    seen = []

    def stop_after_the_first(row: dict) -> bool:
        seen.append(row["epoch"])
        return True

    stopped = train_model(
        shard_dir, TINY_MODEL, train_config(epochs=2), tmp_path / "one", tmp_path / "c2", on_epoch=stop_after_the_first
    )
    assert seen == [1] and stopped["epochs_trained"] == 1 and stopped["best_epoch"] == 1
    assert pd.read_csv(tmp_path / "one" / "train_log.tsv", sep="\t")["epoch"].tolist() == [1]
    assert stopped["best_val_auprc"] == pytest.approx(log["val_auprc"].iloc[0])  # the same first epoch as above


MID_EPOCH_SIGNAL = """
import os, signal, sys, torch
import epiformer.training.train as train
from epiformer.model.transformer import ModelConfig
from epiformer.training.train import TrainConfig
steps = []
real_clip = torch.nn.utils.clip_grad_norm_
def clip_then_signal(*args, **kwargs):
    steps.append(1)
    if len(steps) == int(sys.argv[4]):
        os.kill(os.getpid(), getattr(signal, sys.argv[5]))  # mid-epoch, between two optimiser steps
    return real_clip(*args, **kwargs)
torch.nn.utils.clip_grad_norm_ = clip_then_signal
train.train_model(sys.argv[1], ModelConfig(**{model}), TrainConfig(**{config}), sys.argv[2], sys.argv[3])
"""


def train_until_signal(shard_dir, model, config, tmp_path, stop_at: int, signal_name: str):
    """Train into tmp_path/resumed (checkpoints: tmp_path/ckpt), sending itself `signal_name` at step `stop_at`."""
    script = MID_EPOCH_SIGNAL.format(model=model.to_dict(), config=vars(config))
    arguments = [str(shard_dir), str(tmp_path / "resumed"), str(tmp_path / "ckpt"), str(stop_at), signal_name]
    return subprocess.run([sys.executable, "-c", script, *arguments], capture_output=True, text=True)


def same_predictions(shard_dir, tmp_path, *runs) -> bool:
    from epiformer.evaluation.evaluate import evaluate_model

    for run in runs:
        evaluate_model(tmp_path / run, shard_dir, tmp_path / f"{run}.tsv", tmp_path / f"{run}.json", resamples=10)
    return len({(tmp_path / f"{run}.tsv").read_bytes() for run in runs}) == 1


@pytest.mark.parametrize(
    "signal_name, checkpoint_minutes, exit_code",
    [
        ("SIGKILL", 0, -9),  # killed outright: resumes from the end of epoch 1 (dropout on)
        ("SIGKILL", 1e-9, -9),  # checkpoints after every step: resumes from the last batch done
        ("SIGTERM", 0, 143),  # a SLURM pre-emption: checkpoints that batch, exits 128 + 15
        ("SIGUSR1", 0, 138),  # SLURM's --signal=USR1@... warning before the time limit
    ],
)
def test_a_training_stopped_mid_epoch_resumes_to_identical_predictions(
    shard_dir, tmp_path, signal_name, checkpoint_minutes, exit_code
):
    config = train_config(epochs=3, checkpoint_minutes=checkpoint_minutes)
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "straight", tmp_path / "ckpt-straight")
    steps_per_epoch = -(-len(load_split(shard_dir, "train")) // config.batch_size)
    stop_at = steps_per_epoch + steps_per_epoch // 2  # half-way through epoch 2
    stopped = train_until_signal(shard_dir, TINY_MODEL, config, tmp_path, stop_at, signal_name)
    assert stopped.returncode == exit_code, stopped.stderr
    checkpoint = torch.load(tmp_path / "ckpt" / "last.pt", weights_only=True)
    if signal_name == "SIGKILL" and not checkpoint_minutes:
        assert checkpoint["epoch"] == 1 and checkpoint["partial"] is None
    else:  # the batch being trained when the signal came is the last one in the checkpoint
        assert checkpoint["partial"]["epoch"] == 2
        assert checkpoint["partial"]["batches_done"] == stop_at - steps_per_epoch - (signal_name == "SIGKILL")
    assert not (tmp_path / "resumed").exists()
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "resumed", tmp_path / "ckpt")
    assert same_predictions(shard_dir, tmp_path, "straight", "resumed")


def test_two_process_training_stopped_by_sigterm_resumes_to_identical_predictions(shard_dir, tmp_path):
    """DDP with dropout: each process's dropout stream is restored, whenever the signal lands."""
    config = train_config(epochs=4, devices=2, batch_size=8)
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "straight", tmp_path / "ckpt-straight")
    script = MID_EPOCH_SIGNAL.format(model=TINY_MODEL.to_dict(), config=vars(config))
    # Stop condition never reached in the script (spawned processes don't run it): we signal from outside.
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            str(shard_dir),
            str(tmp_path / "resumed"),
            str(tmp_path / "ckpt"),
            "0",
            "SIGTERM",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    while not (tmp_path / "ckpt" / "last.pt").exists() and process.poll() is None:
        time.sleep(0.05)  # the end of epoch 1
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=300) != 0, "finished before the signal arrived"
    assert "Stopped by signal 15" in process.stderr.read()
    assert not (tmp_path / "resumed").exists()
    train_model(shard_dir, TINY_MODEL, config, tmp_path / "resumed", tmp_path / "ckpt")
    assert same_predictions(shard_dir, tmp_path, "straight", "resumed")


def test_two_fresh_runs_give_byte_identical_predictions(shard_dir, tmp_path):
    from epiformer.evaluation.evaluate import evaluate_model

    for run in ("one", "two"):
        train_model(shard_dir, TINY_MODEL, train_config(epochs=2), tmp_path / run, tmp_path / f"ckpt-{run}")
        evaluate_model(tmp_path / run, shard_dir, tmp_path / f"{run}.tsv", tmp_path / f"{run}.json", resamples=10)
    assert (tmp_path / "one.tsv").read_bytes() == (tmp_path / "two.tsv").read_bytes()


@pytest.fixture(scope="module")
def shards_of_whole_train_batches(tiny_demo, tmp_path_factory):
    """Training pairs a multiple of 8: no partial batch, which two processes would drop."""
    pairs = read_pairs(tiny_demo["demo_a"])
    windows, _ = make_windows(pairs, Genome(tiny_demo["genome"]).sizes, WindowSpec(64, 48))
    windows = assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
    train = windows.index[windows["split"] == "train"]
    out = tmp_path_factory.mktemp("even-shards")
    encode_shards(windows.drop(train[len(train) // 8 * 8 :]), tiny_demo["genome"], out, flank=4, shard_size=64)
    return out


def test_two_process_gloo_training_matches_one_process(shards_of_whole_train_batches, tmp_path):
    """Same global batch: 2 x B/2 with averaged gradients follows the 1 x B loss curve."""
    shard_dir, batch = shards_of_whole_train_batches, 8
    model = ModelConfig(**{**TINY_MODEL.to_dict(), "dropout": 0.0})  # dropout masks differ per process
    config = train_config(epochs=3, batch_size=batch, reverse_complement=False, max_shift=0)
    train_model(shard_dir, model, config, tmp_path / "one", tmp_path / "ckpt-one")
    setup_logging(tmp_path / "train.log")  # as the train rule's script does
    try:
        description = train_model(
            shard_dir, model, TrainConfig(**{**vars(config), "devices": 2}), tmp_path / "two", tmp_path / "ckpt-two"
        )
        logging.getLogger("epiformer").info("the parent's last line")  # must not overwrite the processes' lines
    finally:
        setup_logging()
    logged = (tmp_path / "train.log").read_text()
    assert re.findall(r"INFO epoch (\d+): train_loss", logged) == ["1", "2", "3"]  # rank 0's epoch lines, once each
    assert re.search(r"INFO two epoch 3/3: .* done in", logged)  # and its progress lines, naming the training
    assert logged.rstrip().endswith("the parent's last line") and "Model linear attention" in logged
    one = pd.read_csv(tmp_path / "one" / "train_log.tsv", sep="\t")
    two = pd.read_csv(tmp_path / "two" / "train_log.tsv", sep="\t")
    assert description["device"] == "cpu x 2"
    # Equal up to the order of float additions in the gradient average: stated tolerance 1e-4 relative.
    np.testing.assert_allclose(two["train_loss"], one["train_loss"], rtol=1e-4)
    np.testing.assert_allclose(two["val_loss"], one["val_loss"], rtol=1e-4)


def test_positive_weights_balance_each_source_on_its_own():
    data = types.SimpleNamespace(label=np.array([1, 0, 0, 0, 1, 1, 1, 0]), source=np.array([0, 0, 0, 0, 1, 1, 1, 1]))
    np.testing.assert_allclose(positive_weights(data).numpy(), [3.0, 1 / 3])  # negatives / positives per source


def test_validation_of_pooled_cell_lines_averages_each_cell_lines_own_metrics():
    rng = np.random.default_rng(0)
    labels, source = rng.integers(0, 2, 200), np.repeat([0, 1], 100)
    scores = rng.random(200) + 0.5 * labels * (source == 0) + 0.4 * source  # source 1: high scores, no signal
    metrics = validation_metrics(scores, labels, source)
    each = [roc_auc_score(labels[source == s], scores[source == s]) for s in (0, 1)]
    assert metrics["val_auroc"] == pytest.approx(np.mean(each))
    assert metrics["val_auprc"] == pytest.approx(
        np.mean([average_precision_score(labels[source == s], scores[source == s]) for s in (0, 1)])
    )
    assert metrics["val_auroc"] != pytest.approx(roc_auc_score(labels, scores))
    one = validation_metrics(scores[:100], labels[:100], source[:100])
    assert one["val_auroc"] == pytest.approx(roc_auc_score(labels[:100], scores[:100]))


def test_one_model_trains_on_several_cell_lines_with_their_distances(shard_dir, tmp_path):
    config = dataclasses.replace(TINY_MODEL, distance=True)
    description = train_model(
        [shard_dir, shard_dir], config, train_config(epochs=1), tmp_path / "out", tmp_path / "ckpt"
    )
    log = pd.read_csv(tmp_path / "out" / "train_log.tsv", sep="\t")
    alone = len(load_split(shard_dir, "train"))
    assert len(log) == 1 and description["model"]["distance"] is True
    assert description["trained_on"] == [str(shard_dir), str(shard_dir)]  # a folder given twice is two sources
    assert load_split([shard_dir, shard_dir], "train").source.max() == 1
    # Its validation spans both sources: evaluation scores each cell line's own, nothing is kept for it.
    assert description["val_predictions_sha256"] is None and not (tmp_path / "out" / "val_predictions.tsv").exists()
    model, _ = load_trained_model(tmp_path / "out")
    assert model.head[0].in_features == TINY_MODEL.d_model + 2
    # Twice the pairs: twice the tokens per epoch of the single folder's training.
    single = train_model(shard_dir, config, train_config(epochs=1), tmp_path / "one", tmp_path / "ckpt1")
    assert alone > 0 and description["tokens_per_s"] * log["seconds"][0] == pytest.approx(
        2 * single["tokens_per_s"] * pd.read_csv(tmp_path / "one" / "train_log.tsv", sep="\t")["seconds"][0]
    )


SPAN_MODEL = ModelConfig(**{**TINY_MODEL.to_dict(), "input": "span", "patch_size": 16, "kernel_size": 16})


@pytest.fixture(scope="module")
def span_shard_dir(tiny_long_demo, tmp_path_factory):
    """The tiny long demo's spans (3-20 kb, so batches of every size), split by chromosome."""
    genome = Genome(tiny_long_demo["genome"])
    windows, _ = make_windows(
        read_pairs(tiny_long_demo["demo_long"]), genome.sizes, WindowSpec(64, 48, max_span=100_000)
    )
    windows = assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
    out = tmp_path_factory.mktemp("span-shards")
    stats = {"split": {"mode": "chromosome", "leak_prone": False}}
    encode_spans_of_fasta(windows, tiny_long_demo["genome"], out, flank=4, shard_size=16, windows_stats=stats)
    return out


def saved_model_val_auroc(model_dir, shard_dir) -> float:
    """Validation AUROC of the weights a run saved, scored anew: the log's row of the epoch it kept."""
    from epiformer.inference.trained_model import predict_split

    model, _ = load_trained_model(model_dir)
    scores, labels, _ = predict_split(model, load_split(shard_dir, "val"), max_tokens=8_000)
    return roc_auc_score(labels, scores)


def span_config(**overrides):
    return train_config(**{"epochs": 3, "max_tokens_per_batch": 2_000, **overrides})


def test_a_span_model_trains_evaluates_and_counts_span_tokens(span_shard_dir, tmp_path):
    from epiformer.evaluation.evaluate import evaluate_model

    description = train_model(span_shard_dir, SPAN_MODEL, span_config(epochs=2), tmp_path / "m", tmp_path / "ckpt")
    # One `input`, the model's: the windows record only where windows lie and which pairs were kept.
    assert description["model"]["input"] == "span" and "input" not in description["windows"]
    assert description["peak_memory_mb"] > 0
    log = pd.read_csv(tmp_path / "m" / "train_log.tsv", sep="\t")
    train = load_split(span_shard_dir, "train")
    tokens = int((-(-(train.lengths - 2 * train.flank) // SPAN_MODEL.patch_size)).sum())
    np.testing.assert_allclose(log["tokens_per_s"] * log["seconds"], tokens, rtol=1e-6)
    metrics = evaluate_model(tmp_path / "m", span_shard_dir, tmp_path / "p.tsv", tmp_path / "m.json", resamples=10)
    predictions = pd.read_csv(tmp_path / "p.tsv", sep="\t")
    test = load_split(span_shard_dir, "test")
    assert sorted(predictions["pair_id"]) == sorted(test.pair_id.tolist())  # every test pair once, by pair_id
    by_id = dict(zip(test.pair_id.tolist(), test.label.tolist()))
    assert all(by_id[p] == label for p, label in zip(predictions["pair_id"], predictions["label"]))
    assert metrics["windows"] == {"enhancer_width": 64, "promoter_width": 48}


@pytest.mark.parametrize("signal_name, exit_code", [("SIGKILL", -9), ("SIGTERM", 143)])
def test_a_span_training_stopped_mid_epoch_resumes_to_identical_predictions(
    span_shard_dir, tmp_path, signal_name, exit_code
):
    config = span_config(checkpoint_minutes=1e-9)
    train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "straight", tmp_path / "ckpt-straight")
    train = load_split(span_shard_dir, "train")
    steps_per_epoch = len(SpanBatches(train, config.max_tokens_per_batch, SPAN_MODEL.patch_size))
    stop_at = steps_per_epoch + steps_per_epoch // 2  # half-way through epoch 2
    stopped = train_until_signal(span_shard_dir, SPAN_MODEL, config, tmp_path, stop_at, signal_name)
    assert stopped.returncode == exit_code, stopped.stderr
    checkpoint = torch.load(tmp_path / "ckpt" / "last.pt", weights_only=True)
    assert checkpoint["partial"]["epoch"] == 2
    assert checkpoint["partial"]["batches_done"] == stop_at - steps_per_epoch - (signal_name == "SIGKILL")
    train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "resumed", tmp_path / "ckpt")
    assert same_predictions(span_shard_dir, tmp_path, "straight", "resumed")


def test_two_process_span_training_runs_to_the_end(span_shard_dir, tmp_path):
    """Which batches each process takes is tested in test_batches (disjoint, equal steps); here the run itself."""
    config = span_config(epochs=2, devices=2)
    description = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "two", tmp_path / "ckpt")
    assert description["device"] == "cpu x 2"
    log = pd.read_csv(tmp_path / "two" / "train_log.tsv", sep="\t")
    assert log["epoch"].tolist() == [1, 2]
    assert saved_model_val_auroc(tmp_path / "two", span_shard_dir) == pytest.approx(
        log["val_auroc"][log["epoch"] == description["best_epoch"]].item(), abs=1e-6
    )


def test_a_time_budget_stops_mid_epoch_keeps_a_model_and_says_how_far_it_got(span_shard_dir, tmp_path):
    config = span_config(epochs=3, max_minutes=1e-6)  # spent after the first step
    description = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "m", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "m" / "train_log.tsv", sep="\t")
    steps = len(SpanBatches(load_split(span_shard_dir, "train"), config.max_tokens_per_batch, SPAN_MODEL.patch_size))
    assert steps > 1  # the budget runs out in the middle of the epoch
    assert log["epoch"].tolist() == [1] and log["epoch_fraction"].iloc[0] == pytest.approx(1 / steps)
    assert description["time_budget_reached"] and description["epochs_trained"] == pytest.approx(1 / steps)
    assert saved_model_val_auroc(tmp_path / "m", span_shard_dir) == pytest.approx(log["val_auroc"].item(), abs=1e-6)
    again = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "again", tmp_path / "ckpt")  # resumes: spent
    assert again["epochs_trained"] == description["epochs_trained"]
    unlimited = train_model(span_shard_dir, SPAN_MODEL, span_config(epochs=2), tmp_path / "u", tmp_path / "ckpt-u")
    assert unlimited["epochs_trained"] == 2 and not unlimited["time_budget_reached"]


def test_a_budget_spent_on_an_epochs_last_batch_ends_training_and_says_so(span_shard_dir, tmp_path):
    config = span_config(epochs=3, max_minutes=1e-6, max_tokens_per_batch=10**8)  # one batch an epoch
    assert len(SpanBatches(load_split(span_shard_dir, "train"), config.max_tokens_per_batch, 16)) == 1
    description = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "m", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "m" / "train_log.tsv", sep="\t")
    assert log["epoch"].tolist() == [1] and log["epoch_fraction"].tolist() == [1.0]
    assert description["time_budget_reached"] and description["epochs_trained"] == 1


def span_token_counts(shard_dir, config, epoch) -> np.ndarray:
    """The model tokens of each step of `epoch`, counted here from the shards and the batch plan."""
    train = load_split(shard_dir, "train")
    batches = SpanBatches(
        train, config.max_tokens_per_batch, SPAN_MODEL.patch_size, shuffle=True, seed=config.seed, epoch=epoch
    )
    lengths = train.lengths - 2 * train.flank
    return np.array([(-(-lengths[rows] // SPAN_MODEL.patch_size)).sum() for rows in batches.batches])


def test_a_token_budget_stops_at_the_step_that_reaches_it_and_ends_the_schedule_there(span_shard_dir, tmp_path):
    first, second = (
        span_token_counts(span_shard_dir, span_config(), 1),
        span_token_counts(span_shard_dir, span_config(), 2),
    )
    assert len(second) > 2
    budget = int(first.sum() + second[:2].sum()) - 1  # reached by the second step of epoch 2
    config = span_config(epochs=3, max_tokens=budget)
    description = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "m", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "m" / "train_log.tsv", sep="\t")
    assert log["epoch"].tolist() == [1, 2]
    assert log["tokens"].tolist() == [first.sum(), second[:2].sum()]
    assert log["epoch_fraction"].tolist() == [1.0, pytest.approx(2 / len(second))]
    assert description["tokens_trained"] == budget + 1 and description["token_budget_reached"]
    assert description["epochs_trained"] == pytest.approx(1 + 2 / len(second))
    assert not description["time_budget_reached"]
    # The cosine schedule was laid over the steps the budget allows: it ends at 0 at the last one.
    assert log["learning_rate"].iloc[-1] == pytest.approx(0.0, abs=1e-12)
    assert saved_model_val_auroc(tmp_path / "m", span_shard_dir) == pytest.approx(
        log.set_index("epoch").loc[description["best_epoch"], "val_auroc"], abs=1e-6
    )
    # Without a budget every step runs, over a schedule of all epochs.
    unlimited = train_model(span_shard_dir, SPAN_MODEL, span_config(epochs=2), tmp_path / "u", tmp_path / "ckpt-u")
    assert unlimited["epochs_trained"] == 2 and not unlimited["token_budget_reached"]
    assert unlimited["tokens_trained"] == first.sum() + second.sum()


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_token_budget_trains_the_same_model_on_a_quiet_and_a_loaded_machine(span_shard_dir, tmp_path):
    """Where the run ends depends on the data alone: a CPU-bound process beside it changes nothing."""
    import multiprocessing

    first = span_token_counts(span_shard_dir, span_config(), 1)
    config = span_config(epochs=3, max_tokens=int(first.sum() * 1.5))
    quiet = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "quiet", tmp_path / "ckpt-quiet")
    hogs = [multiprocessing.get_context("spawn").Process(target=_busy, args=(120,)) for _ in range(2)]
    for hog in hogs:
        hog.start()
    try:
        loaded = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "loaded", tmp_path / "ckpt-loaded")
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join()
    assert loaded["tokens_trained"] == quiet["tokens_trained"] and loaded["best_epoch"] == quiet["best_epoch"]
    assert (
        load_file(tmp_path / "quiet" / "model.safetensors").keys()
        == load_file(tmp_path / "loaded" / "model.safetensors").keys()
    )
    for name, value in load_file(tmp_path / "quiet" / "model.safetensors").items():
        assert torch.equal(value, load_file(tmp_path / "loaded" / "model.safetensors")[name]), name
    assert same_predictions(span_shard_dir, tmp_path, "quiet", "loaded")


def test_two_processes_stop_together_at_a_token_budget(span_shard_dir, tmp_path):
    config = span_config(epochs=3, devices=2, max_tokens=1)  # reached by the first step of both processes
    description = train_model(span_shard_dir, SPAN_MODEL, config, tmp_path / "two", tmp_path / "ckpt")
    log = pd.read_csv(tmp_path / "two" / "train_log.tsv", sep="\t")
    train = load_split(span_shard_dir, "train")
    lengths = train.lengths - 2 * train.flank
    batches = [
        SpanBatches(train, 2_000, SPAN_MODEL.patch_size, shuffle=True, seed=0, epoch=1, rank=rank, world_size=2)
        for rank in (0, 1)
    ]
    first_step = sum(int((-(-lengths[b.batches[0]] // SPAN_MODEL.patch_size)).sum()) for b in batches)
    assert log["epoch"].tolist() == [1] and log["tokens"].tolist() == [first_step]
    assert description["token_budget_reached"] and description["device"] == "cpu x 2"


def test_the_log_says_how_many_pairs_a_span_step_holds(span_shard_dir, caplog):
    train = load_split(span_shard_dir, "train")
    batches = SpanBatches(train, max_tokens=2_000, patch_size=SPAN_MODEL.patch_size)
    with caplog.at_level(logging.INFO, logger="epiformer.training.train"):
        log_pairs_per_step(batches)
    steps, mean, median = re.search(
        r"(\d+) steps an epoch, ([\d.]+) pairs a step \(median ([\d.]+)\)", caplog.text
    ).groups()
    sizes = [len(rows) for rows in batches.batches]
    assert int(steps) == len(sizes) and sum(sizes) == len(train.pair_id)  # every pair once an epoch
    assert float(mean) == pytest.approx(len(train.pair_id) / len(sizes), abs=0.05)
    assert float(median) == np.median(sizes)


def test_progress_lines_name_the_training_by_its_folder_below_results():
    # Two trainings of a workflow run print their progress side by side: cell line, model and replicate tell them apart.
    assert training_label(Path("results/demo_scale/linear_span/replicates/1")) == "demo_scale/linear_span/replicates/1"
    assert training_label(Path("/runs/x/results/pooled/linear")) == "pooled/linear"
    assert training_label(Path("/tmp/results")) == "results" and training_label(Path("out")) == "out"


def test_a_span_model_trains_and_predicts_on_a_draft_assembly_under_the_open_file_limit(tiny_long_demo, tmp_path):
    """The tiny long demo's chromosomes and 20,000 scaffolds, as a draft assembly, with 1,024 open files at most:
    its genome store has a file a sequence, and span shards, training and `epiformer predict` all read it."""
    from tests.helpers import read_fasta, under_open_file_limit, write_fasta

    rng = np.random.default_rng(11)
    scaffolds = {f"scaffold_{i}": "".join(row) for i, row in enumerate(rng.choice(list("ACGTN"), (20_000, 30)))}
    draft = write_fasta(tmp_path / "draft.fa", read_fasta(tiny_long_demo["genome"]) | scaffolds)
    train = """
import json, sys
from epiformer.data.genome import Genome
from epiformer.data.pairs import read_pairs
from epiformer.data.splits import SplitSpec, assign_splits
from epiformer.data.windows import WindowSpec, make_windows
from epiformer.training.train import train_model
from tests.helpers import encode_spans_of_fasta
from tests.training.test_train import SPAN_MODEL, span_config

draft, pairs, out = json.loads(sys.argv[1])
windows, _ = make_windows(read_pairs(pairs), Genome(draft).sizes, WindowSpec(64, 48, max_span=100_000))
windows = assign_splits(windows, SplitSpec(val_chromosomes=("chr2",), test_chromosomes=("chr3",)))
stats = {"split": {"mode": "chromosome", "leak_prone": False}}
encode_spans_of_fasta(windows, draft, f"{out}/shards", flank=4, shard_size=16, windows_stats=stats)
train_model(f"{out}/shards", SPAN_MODEL, span_config(epochs=1), f"{out}/m", f"{out}/c")
"""
    arguments = json.dumps([str(draft), str(tiny_long_demo["demo_long"]), str(tmp_path)])
    trained = subprocess.run(
        [sys.executable, "-c", train, arguments],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=under_open_file_limit(),
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    command = [sys.executable, "-m", "epiformer.cli", "predict", "--model", tmp_path / "m", "--genome", draft]
    command += ["--pairs", tiny_long_demo["demo_long"], "--out", tmp_path / "scores.tsv"]
    predicted = subprocess.run(
        list(map(str, command)), capture_output=True, text=True, timeout=300, preexec_fn=under_open_file_limit()
    )
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    scores = pd.read_csv(tmp_path / "scores.tsv", sep="\t")
    assert len(scores) == len(read_pairs(tiny_long_demo["demo_long"])) and scores["score"].between(0, 1).all()
