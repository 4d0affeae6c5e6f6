"""A real SLURM run: a one-node cluster on localhost runs the tiny workflow through profiles/slurm.

As root with apt-get, the test installs Debian's slurm-wlm and munge when they are missing,
starts munged, slurmctld and slurmd as plain processes (no systemd) with every file they
write under one temporary folder and on free ports, runs `snakemake --profile profiles/slurm`
with the slurm executor, and stops the daemons it started by PID, also when the test fails.
Nothing outside that folder changes, so a second run never meets a first run's leftovers.
Where it cannot run (not root, no apt-get, no network for apt) it skips and says why.
docs/cluster.md explains the cluster settings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import REPO, SNAKEMAKE, copy_workflow, require_bedtools, tiny_config

SBIN, BIN = Path("/usr/sbin"), Path("/usr/bin")
NEEDED = [SBIN / "munged", SBIN / "mungekey", SBIN / "slurmctld", SBIN / "slurmd", BIN / "sbatch", BIN / "srun"]
PROFILE = REPO / "profiles" / "slurm"
CELL_LINES, MODELS = ("demo_a", "demo_b"), ("linear", "softmax")
SNAKEMAKE_TIMEOUT_S = 600  # a quiet 2-core machine needs ~150 s; a busy one twice that
# What a localhost cluster lacks, set on the command line over the profile:
CLUSTER_OVERRIDES = [
    "--set-resources",
    "train:gpu=0",  # no GPU on this node; a GPU request could never be scheduled
    "--slurm-status-command",
    "squeue",  # no accounting database (slurmdbd), so sacct cannot answer
    "--slurm-init-seconds-before-status-checks",
    "10",  # jobs take seconds here, not hours
]


def install_slurm_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: installs slurm-wlm and munge with apt-get and starts munged, slurmctld and slurmd")
    if all(path.exists() for path in NEEDED):
        return
    if shutil.which("apt-get") is None:
        pytest.skip("SLURM is not installed and there is no apt-get to install Debian's slurm-wlm and munge")
    install = [
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=120",
        "slurm-wlm",
        "munge",
    ]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run = subprocess.run(install, check=False, env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:  # a stale package list: refresh it once
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True, timeout=300)
        run = subprocess.run(install, check=False, env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        pytest.skip(f"apt-get could not install slurm-wlm and munge (no network?): {run.stderr.strip()[-500:]}")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def node_line() -> str:
    """This machine's CPUs and memory as `slurmd -C` reports them; a node that claims more drains."""
    hardware = subprocess.run([SBIN / "slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    return re.sub(r"^NodeName=\S+", "NodeName=localhost NodeAddr=127.0.0.1", hardware.splitlines()[0])


def write_slurm_conf(folder: Path, munge_socket: Path) -> Path:
    ctld_port, slurmd_port = free_ports(2)
    settings = {
        "ClusterName": "epiformertest",
        "SlurmctldHost": "localhost",
        "SlurmctldPort": ctld_port,
        "SlurmdPort": slurmd_port,
        "SlurmUser": "root",
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={munge_socket}",
        "StateSaveLocation": folder / "slurmctld",
        "SlurmdSpoolDir": folder / "slurmd",
        "SlurmctldPidFile": folder / "slurmctld.pid",
        "SlurmdPidFile": folder / "slurmd.pid",
        "SlurmctldLogFile": folder / "slurmctld.log",
        "SlurmdLogFile": folder / "slurmd.log",
        "ProctrackType": "proctrack/linuxproc",  # no cgroups in a container
        "TaskPlugin": "task/none",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "DefMemPerCPU": 256,  # a job without --mem would otherwise claim the whole node
        "ReturnToService": 2,
        "MinJobAge": 1800,  # finished jobs stay visible to squeue and scontrol for the checks
        "KillWait": 5,  # seconds between SIGTERM and SIGKILL for a cancelled job (default 30)
        "AccountingStorageType": "accounting_storage/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "MpiDefault": "none",
        "MailProg": "/bin/true",
    }
    lines = [f"{key}={value}" for key, value in settings.items()]
    lines += [node_line(), "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP"]
    (folder / "slurmctld").mkdir()
    (folder / "slurmd").mkdir()
    conf = folder / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def start_daemon(request, command: list, log: Path, **popen) -> subprocess.Popen:
    """Start one daemon in the foreground of its own session; a finalizer stops it by PID."""
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, **popen)
    request.addfinalizer(lambda: stop_process(process))
    return process


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(ready, what: str, processes: list[subprocess.Popen], folder: Path, timeout_s: float = 30) -> None:
    """Poll `ready` until it is true; fail with the daemons' logs if one exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        exited = [f"{process.args[0]} exited with {process.returncode}" for process in processes if process.poll()]
        if exited:
            pytest.fail(f"{'; '.join(exited)} before {what}:\n{daemon_logs(folder)}")
        if ready():
            return
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout_s} s:\n{daemon_logs(folder)}")


def daemon_logs(folder: Path) -> str:
    tails = [f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for log in sorted(folder.glob("*.out"))]
    return "\n".join(tails)


def start_munge(request, folder: Path) -> Path:
    """munged with its own key and socket; munged runs as the munge user and wants strict permissions."""
    private, public = folder / "munge", folder / "munge-socket"
    for path, mode in ((private, 0o700), (public, 0o755)):
        path.mkdir(mode=mode)
        shutil.chown(path, "munge", "munge")
    key = private / "munge.key"
    subprocess.run([SBIN / "mungekey", "--create", "--keyfile", key], check=True, capture_output=True)
    shutil.chown(key, "munge", "munge")
    munge_socket = public / "munge.socket"
    munged = start_daemon(
        request,
        [
            SBIN / "munged",
            "--foreground",
            f"--socket={munge_socket}",
            f"--key-file={key}",
            f"--pid-file={public / 'munged.pid'}",
            f"--log-file={private / 'munged.log'}",
            f"--seed-file={private / 'munged.seed'}",
        ],
        folder / "munged.out",
        user="munge",
        group="munge",
    )

    def credential_round_trips() -> bool:
        socket_option = f"--socket={munge_socket}"
        encoded = subprocess.run(["munge", socket_option, "--no-input"], check=False, capture_output=True)
        decoded = subprocess.run(["unmunge", socket_option, "--no-output"], check=False, input=encoded.stdout)
        return encoded.returncode == decoded.returncode == 0

    wait_until(credential_round_trips, "munge credential", [munged], folder)
    return munge_socket


def srun_shim(folder: Path, conf: Path) -> Path:
    """A folder whose `srun` sets SLURM_CONF and runs the real srun.

    Inside each job the slurm-jobstep plugin (0.6.1) removes every SLURM_* variable except the
    job's identity before it calls srun, SLURM_CONF included; srun then finds no slurm.conf,
    because this cluster's lives here rather than in /etc/slurm where a real cluster keeps it.
    """
    shim = folder / "bin"
    shim.mkdir()
    (shim / "srun").write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {BIN / "srun"} "$@"\n')
    (shim / "srun").chmod(0o755)
    return shim


def cancel_jobs(env: dict) -> None:
    """Cancel what a failed or timed-out run left queued, so slurmd stops with no job running."""
    subprocess.run(["scancel", "--user", str(os.geteuid())], check=False, env=env, capture_output=True, timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h", "-o", "%i"], check=False, env=env, capture_output=True, text=True)
        if queue.returncode != 0 or not queue.stdout.strip():
            return
        time.sleep(0.5)


@pytest.fixture
def slurm_cluster(request):
    """A running one-node cluster on localhost; returns the environment that reaches it."""
    install_slurm_or_skip()
    folder = Path(tempfile.mkdtemp(prefix="epiformer-slurm-"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    folder.chmod(0o755)  # munged (user munge) must reach its folders inside
    conf = write_slurm_conf(folder, start_munge(request, folder))
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": f"{srun_shim(folder, conf)}:{os.environ['PATH']}"}
    slurmctld = start_daemon(request, [SBIN / "slurmctld", "-D", "-c"], folder / "slurmctld.out", env=env)
    slurmd = start_daemon(request, [SBIN / "slurmd", "-D", "-N", "localhost"], folder / "slurmd.out", env=env)
    request.addfinalizer(lambda: cancel_jobs(env))  # finalizers run last-in first-out: this one before slurmd stops

    def node_is_idle() -> bool:
        sinfo = ["sinfo", "--noheader", "--nodes", "localhost", "--format", "%T"]
        return subprocess.run(sinfo, check=False, env=env, capture_output=True, text=True).stdout.strip() == "idle"

    wait_until(node_is_idle, "idle node", [slurmctld, slurmd], folder)
    return env


def slurm_jobs(env: dict) -> pd.DataFrame:
    """Every job the cluster ran: its rule (from the plugin's --comment), state and what it was given."""
    shown = subprocess.run(["scontrol", "show", "job", "-o"], env=env, capture_output=True, text=True, check=True)
    rows = []
    for line in shown.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        rule = re.match(r"rule_(\w+?)(?:_wildcards_|$)", fields.get("Comment", ""))
        rows.append(
            {
                "rule": rule and rule.group(1),
                "state": fields["JobState"],
                "exit_code": fields["ExitCode"],
                "granted": (int(fields["NumCPUs"]), fields["MinMemoryNode"], fields["TimeLimit"]),
            }
        )
    return pd.DataFrame(rows)


def planned_requests(log: str) -> dict[str, tuple]:
    """Each rule's (cpus, memory, time limit) in SLURM's notation, from the job blocks Snakemake logs."""
    planned = {}
    for block in re.finditer(r"^rule (\w+):\n((?:    .*\n)+)", log, re.MULTILINE):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block.group(2), re.MULTILINE))
        resources = dict(re.findall(r"(\w+)=([^,]+)", fields["resources"]))
        planned[block.group(1)] = (
            int(fields.get("threads", 1)),
            f"{resources['mem_mb']}M",
            minutes_as_slurm_time(int(resources["runtime"])),
        )
    return planned


def minutes_as_slurm_time(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


@pytest.mark.slow  # about 2.5 minutes: ~20 SLURM jobs of ~10 s each on a 2-core node
def test_tiny_workflow_runs_through_the_slurm_profile(slurm_cluster, tmp_path):
    require_bedtools()
    config = tiny_config()
    copy_workflow(tmp_path, config)
    targets = [f"results/{cell}/{model}/metrics.json" for cell in CELL_LINES for model in MODELS]
    targets.append("results/summary.tsv")  # every stage from demo data to summary; plots are left out for time
    command = [*SNAKEMAKE, "--profile", str(PROFILE), *CLUSTER_OVERRIDES, *targets]
    try:
        run = subprocess.run(
            command,
            check=False,
            cwd=tmp_path,
            env=slurm_cluster,
            capture_output=True,
            text=True,
            timeout=SNAKEMAKE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as expired:
        log = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr or ""
        pytest.fail(f"snakemake did not finish in {SNAKEMAKE_TIMEOUT_S} s:\n{log[-5000:]}")
    assert run.returncode == 0, run.stderr[-5000:]

    for cell in CELL_LINES:
        for model in MODELS:
            metrics = json.loads((tmp_path / "results" / cell / model / "metrics.json").read_text())
            assert 0 <= metrics["auroc"] <= 1 and metrics["n_test"] > 0
    summary = pd.read_csv(tmp_path / "results" / "summary.tsv", sep="\t")
    expected_rows = {(cell, model) for cell in CELL_LINES for model in MODELS}
    assert expected_rows <= set(zip(summary["cell_line"], summary["model"]))

    jobs = slurm_jobs(slurm_cluster)
    assert {"demo_data", "windows", "encode", "train", "evaluate", "summary"} <= set(jobs["rule"])
    assert (jobs["state"] == "COMPLETED").all() and (jobs["exit_code"] == "0:0").all(), jobs.to_string()
    assert (jobs["rule"] == "train").sum() == len(CELL_LINES) * len(MODELS)
    planned = planned_requests(run.stderr)
    for job in jobs.itertuples():  # what SLURM granted is exactly what Snakemake asked for
        assert job.granted == planned[job.rule], f"{job.rule}: granted {job.granted}, asked {planned[job.rule]}"
    train, asked = config["train"], config["resources"]["train"]
    processes = train.get("devices", 1)  # the rule asks threads and memory per data-parallel process
    memory, time_limit = f"{asked['mem_mb'] * processes}M", minutes_as_slurm_time(asked["runtime"])
    assert planned["train"] == (train["threads"] * processes, memory, time_limit)
    assert planned["windows"] == (1, "4000M", minutes_as_slurm_time(60))  # its rule's own threads and resources


def test_each_profile_is_a_profile_yaml():
    # Snakemake >= 9.19 reads a profile folder's profile.yaml; a config.yaml there is only its fallback.
    folders = sorted(path for path in (REPO / "profiles").iterdir() if path.is_dir())
    assert [folder.name for folder in folders] == ["local", "slurm"]
    for folder in folders:
        assert (folder / "profile.yaml").is_file() and not (folder / "config.yaml").exists(), folder


@pytest.mark.parametrize("device, devices, expected", [("auto", 1, "1"), ("cuda", 2, "2"), ("cpu", 1, None)])
def test_profile_asks_a_gpu_per_training_process_and_none_elsewhere(tmp_path, device, devices, expected):
    """The GPU request the SLURM run above turns off, seen in a dry run through the unchanged profile."""
    config = tiny_config()
    config["train"].update(device=device, devices=devices, batch_size=16)
    copy_workflow(tmp_path, config)
    command = [*SNAKEMAKE, "--profile", str(PROFILE), "--dry-run", "results/summary.tsv"]
    run = subprocess.run(command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-5000:]
    blocks = re.findall(r"^rule (\w+):\n((?:    .*\n)+)", run.stdout + run.stderr, re.MULTILINE)
    gpus = {rule: re.search(r"\bgpu=(\d+)", block) for rule, block in blocks}
    train = gpus["train"].group(1) if gpus["train"] else None
    assert train == expected or (expected is None and train == "0")
    assert not any(match and match.group(1) != "0" for rule, match in gpus.items() if rule != "train")


@pytest.mark.parametrize("device, expected", [("auto", "1"), ("cpu", "0")])
def test_a_span_models_evaluation_and_transfer_ask_for_the_gpu_it_trained_on(tmp_path, device, expected):
    """Scoring long spans costs as much as an epoch: a span model scores where it trained; element models on CPUs."""
    from tests.helpers import TINY_MODEL

    config = tiny_config()
    config["train"].update(device=device)
    config["models"]["span"] = {"attention": "linear", **TINY_MODEL, "input": "span", "patch_size": 16}
    config["models"]["span"]["kernel_size"] = 16
    copy_workflow(tmp_path, config)
    command = [*SNAKEMAKE, "--profile", str(PROFILE), "--dry-run", "results/summary.tsv", "results/transfer/span.tsv"]
    run = subprocess.run(command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-5000:]
    blocks = re.findall(r"^rule (\w+):\n((?:    .*\n)+)", run.stdout + run.stderr, re.MULTILINE)
    asked = {}
    for rule, block in blocks:
        model = re.search(r"model=(\w+)", block)
        gpu = re.search(r"\bgpu=(\d+)", block)
        asked[(rule, model.group(1) if model else None)] = gpu.group(1) if gpu else "0"
    assert asked[("evaluate", "span")] == asked[("transfer", "span")] == expected
    assert asked[("evaluate", "linear")] == "0"
