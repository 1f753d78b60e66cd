"""Fault tests on the real trainer (`python -m runtime.cli`, real MuJoCo env, real SAC learner):
SIGKILL of the collector, SIGTERM of the trainer, and an injected learner exception. Each asserts the
classification, the exit code, complete schema-valid artifacts, no surviving process and no /dev/shm
residue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from soakbench.runtime.artifacts import RUN_CONFIG_SCHEMA, read_run_summary, validate
from soakbench.runtime.manager.shm import list_segments

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
# These tests judge the lifecycle, not learning: one update per iteration, not the owner's learning recipe
# of 8, keeps an iteration cheap and the fault timings of these tests where they were measured.
LIFECYCLE_LEARNING = ("algo.updates_per_iteration=1",)


def _start(log_dir: Path, *extra: str, new_session: bool = False) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "soakbench.runtime.cli", "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        "algo.num_envs=16", "algo.max_iterations=100000", "algo.save_interval=100000", "training.no_play=true",
        "training.physics_threads=1", f"log_dir={log_dir}", *LIFECYCLE_LEARNING, *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=new_session
    )


def _wait_for_iteration(
    proc: subprocess.Popen[bytes], log_dir: Path, iteration: int, timeout_s: float = 240
) -> None:
    deadline = time.monotonic() + timeout_s
    progress = log_dir / "progress.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
        if progress.exists():
            lines = progress.read_text().splitlines()
            if lines and json.loads(lines[-1])["iteration"] >= iteration:
                return
        time.sleep(0.2)
    raise AssertionError(f"trainer did not reach iteration {iteration} in {timeout_s} s")


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _finish(
    proc: subprocess.Popen[bytes], family: list[psutil.Process], log_dir: Path, timeout_s: float
) -> dict[str, Any]:
    try:
        proc.wait(timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.5)
    survivors = [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert survivors == [], f"processes survived the trainer: {survivors}"
    assert [n for n in list_segments() if n.startswith(f"soakbench_{proc.pid}_")] == []
    validate(json.loads((log_dir / "run_config.json").read_text()), RUN_CONFIG_SCHEMA)
    assert (log_dir / "progress.jsonl").exists() and list(log_dir.glob("events.out.tfevents.*"))
    summary = read_run_summary(log_dir / "run_summary.json")  # complete and schema-valid
    assert summary["runtime_manifest"]["shutdown"]["cleanup"]["errors"] == []
    return summary


def _is_collector(p: psutil.Process) -> bool:
    """A multiprocessing spawn child. Matched positively: between fork and exec any child (the resource
    tracker too) still shows the trainer's own command line, so excluding "resource_tracker" once picked
    the tracker, killed it and left the real collector running."""
    return "spawn_main" in " ".join(p.cmdline())


def _collector(trainer_pid: int) -> psutil.Process:
    procs = [p for p in _descendants(trainer_pid) if _is_collector(p)]
    assert len(procs) == 1, [p.cmdline() for p in procs]
    return procs[0]


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_sigkill_collector_is_collector_failure(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    proc = _start(log_dir)
    _wait_for_iteration(proc, log_dir, 3)
    family = _descendants(proc.pid)
    os.kill(_collector(proc.pid).pid, signal.SIGKILL)
    killed_at = time.monotonic()
    summary = _finish(proc, family, log_dir, 60)
    assert time.monotonic() - killed_at < 15  # detected within a few seconds, cleanup included
    assert proc.returncode == 1
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "failed"
    assert summary["failure_classification"] == sd["classification"] == "collector_failure"
    assert "SIGKILL" in summary["failure_reason"]
    assert summary["runtime_manifest"]["collector"]["exitcode"] == -9


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_collector_killed_during_startup_is_collector_failure(tmp_path: Path) -> None:
    """Killed before its first vector step, the collector breaks the trainer's pipe mid-handshake; that
    is still the collector's failure, not an unknown one."""
    log_dir = tmp_path / "run"
    proc = _start(log_dir)
    deadline = time.monotonic() + 120
    collector = None
    while collector is None and time.monotonic() < deadline and proc.poll() is None:
        kids = [p for p in _descendants(proc.pid) if _is_collector(p)]
        collector = kids[0] if kids else None
        time.sleep(0.05)
    assert collector is not None, "no collector process appeared"
    family = _descendants(proc.pid)
    collector.kill()
    summary = _finish(proc, family, log_dir, 60)
    assert proc.returncode == 1
    assert summary["failure_classification"] == "collector_failure", summary["failure_reason"]
    assert summary["runtime_manifest"]["collector"]["exitcode"] == -9


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_sigterm_trainer_is_external_cancellation(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    proc = _start(log_dir)
    _wait_for_iteration(proc, log_dir, 3)
    family = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    sent_at = time.monotonic()
    summary = _finish(proc, family, log_dir, 30)
    assert time.monotonic() - sent_at < 10
    assert proc.returncode == 128 + signal.SIGTERM
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "cancelled"
    assert sd["classification"] == "external_cancellation" and sd["owner"] == "external"
    ri = summary["runtime_manifest"]["replay_ingress"]
    assert ri["early_returns"] == ri["dropped_batches"] == ri["closed_returns"] + ri["stop_returns"]


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_sigterm_to_the_process_group_is_external_cancellation(tmp_path: Path) -> None:
    """What the soak monitor does on a timeout or its own cancellation: the collector receives the
    signal too and must not be mistaken for a crashed collector."""
    log_dir = tmp_path / "run"
    proc = _start(log_dir, new_session=True)
    _wait_for_iteration(proc, log_dir, 3)
    family = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGTERM)
    summary = _finish(proc, family, log_dir, 30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert summary["runtime_manifest"]["shutdown"]["classification"] == "external_cancellation"
    assert summary["runtime_manifest"]["collector"]["exitcode"] == 0  # stopped by the trainer


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_injected_learner_exception_is_learner_failure(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    proc = _start(log_dir, "training.test_fault=learner_exception", "training.test_fault_iteration=6")
    family: list[psutil.Process] = []
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        family = family or list(_descendants(proc.pid))
        time.sleep(0.1)
    summary = _finish(proc, family, log_dir, 30)
    assert proc.returncode == 1
    sd = summary["runtime_manifest"]["shutdown"]
    assert sd["classification"] == "learner_failure" and sd["owner"] == "learner"
    assert summary["iterations"] == 6
    assert summary["runtime_manifest"]["collector"]["exitcode"] == 0  # stopped, not crashed


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train")
def test_normal_run_counts_and_leaves_nothing(tmp_path: Path) -> None:
    """Baseline for the faults above: the same real trainer completes and accounts for every slot."""
    log_dir = tmp_path / "run"
    proc = _start(
        log_dir,
        "algo.max_iterations=20",
        "training.replay_ingress_slot_rows=8",
        "training.no_play=false",
        "training.playback_steps=5",
    )
    family: list[psutil.Process] = []
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        family = family or list(_descendants(proc.pid))
        time.sleep(0.1)
    summary = _finish(proc, family, log_dir, 30)
    assert proc.returncode == 0
    m = summary["runtime_manifest"]
    assert summary["status"] == "completed" and m["shutdown"]["classification"] == "normal_completion"
    assert summary["total_env_steps"] == 16 * 20
    ri = m["replay_ingress"]
    assert ri["published_sequence"] == ri["release_sequence"] == 16 * 20 // 8
    assert ri["final_occupancy"] == 0 and ri["dropped_batches"] == 0
    assert m["inference_flight"]["final_queue_depth"] == m["inference_flight"]["final_publication_lag"] == 0
    assert m["backend_diagnostics"]["available"] is True
    assert summary["playback"]["steps"] == 5


# The run completes, then a SIGTERM reaches the trainer just before its summary is written: what torchrun
# does to a rank whose peer has just exited. The trainer, not the default action, must handle it.
LATE_SIGTERM = """
import os, signal, sys
from soakbench.runtime import artifacts
from soakbench.runtime.cli import main

write = artifacts.write_run_summary
def signalled_then_written(log_dir, summary):
    os.kill(os.getpid(), signal.SIGTERM)
    write(log_dir, summary)
artifacts.write_run_summary = signalled_then_written
sys.argv = ["train", *sys.argv[1:]]
main()
"""


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_a_closing_sigterm_while_the_summary_is_written_does_not_cut_it_off(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-c", LATE_SIGTERM, "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        "algo.num_envs=8", "algo.max_iterations=3", "training.no_play=true", f"log_dir={log_dir}",
        *LIFECYCLE_LEARNING,
    ]  # fmt: skip
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    assert read_run_summary(log_dir / "run_summary.json")["status"] == "completed"
