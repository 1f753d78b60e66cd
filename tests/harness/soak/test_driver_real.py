"""`soak run` on the real CPU trainer (slow): a short clean soak passes every pass-table row; SIGKILL of the
collector gives collector_failure with nothing left behind."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.soak._soakrun import REPO, SoakOutcome, alive, assert_nothing_left, run_segments

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]


def _soak_run_argv(tmp: Path, iterations: int, min_duration: float) -> tuple[list[str], Path]:
    output = tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "run",
        "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        "--num-envs", "16", "--iterations", str(iterations),
        "--min-duration-seconds", str(min_duration), "--sample-interval-seconds", "0.25",
        "--min-trend-samples", "8",
        "--startup-timeout-seconds", "240", "--stale-progress-seconds", "120",
        "--post-shutdown-grace-seconds", "2", "--termination-grace-seconds", "20",
        "--shm-attribution", "evidence", "--live", "plain",
        "--extra-override", "training.heartbeat_seconds=1",
        # a lifecycle soak: one update per iteration, not the owner's learning recipe of 8
        "--extra-override", "algo.updates_per_iteration=1",
        "--log-dir", str(tmp / "run"), "--output", str(output),
    ]  # fmt: skip
    return argv, output


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="soak")
def test_clean_cpu_soak_passes(tmp_path: Path) -> None:
    # min duration 1 s: spawning the trainer alone takes longer on any host, so the row is exercised but
    # never races the host's speed (5 s once failed: a quiet host ran the 120 iterations in 4.8 s). 600
    # iterations at 0.25 s sampling leave a quiet host (~75 iterations/s) ~30 post-start-up samples, the
    # 8-sample trend window a verdict needs (the 30-sample default is for real soaks, docs/soak-design.md)
    argv, output = _soak_run_argv(tmp_path, iterations=600, min_duration=1)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    outcome = SoakOutcome(done.returncode, done.stdout, done.stderr, output)
    art = outcome.artifact
    assert done.returncode == 0, (art["failure_reason"], done.stderr[-3000:])
    assert art["mode"] == "run" and art["status"] == "passed" and art["run_status"] == "completed"
    assert {c["result"] for c in art["criteria"]} <= {"pass", "not_applicable"}
    informational = {"leak_verdicts", "throughput_drift", "gpu_throttle", "survival"}  # survival: no target
    if not art["gpu_health"]["available"]:  # a CPU host: the GPU rows say NVML's reason, not_applicable
        informational |= {"gpu_xid_errors", "gpu_ecc_uncorrected"}
    judged = [c for c in art["criteria"] if c["name"] not in informational]
    assert judged and all(c["result"] == "pass" for c in judged)
    # a decline is information unless --fail-on-throughput-drift: reported, never judged by default
    assert outcome.criterion("throughput_drift")["result"] == "not_applicable"
    assert art["throughput_drift"]["verdict"] in ("stable", "declining", "insufficient_data")
    assert "growing" not in art["resource_summary"]["leak_verdicts"].values()
    # the runtime marks its processes, so the verdicts per process name the trainer and its collector
    per_process = art["resource_summary"]["per_process"]["processes"]
    assert {"trainer", "collector"} <= {p["role"] for p in per_process}
    assert all(p["failing"] == [] for p in per_process)
    assert art["replay"]["release_sequence"] == art["replay"]["published_sequence"]
    assert art["shutdown"]["classification"] == "normal_completion"
    # what produced it: every process's files, its Python, and the distributions of what it imported
    # and of the native libraries it mapped (the trainer maps torch's own libraries)
    inputs = art["inputs"]
    assert inputs["interpreter"] == platform.python_version()
    assert {"files", "distributions", "interpreter"} <= set(inputs["recorded"])
    assert "native libraries" in inputs["recorded"] or sys.platform != "linux"
    assert {"runtime/learners/sac.py", "runtime/manager/trainer.py"} <= set(inputs["files"])
    assert {"torch", "mujoco"} <= set(inputs["distributions"])
    assert output.with_suffix(".html").exists()
    assert_nothing_left(outcome)


def _collector(samples: Path, root_pid: int) -> dict[str, Any] | None:
    """The trainer's child process from the latest sample, once progress has started."""
    if not samples.exists():
        return None
    lines = samples.read_text().splitlines()
    if not lines:
        return None
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    if not last.get("progress"):
        return None
    # the spawn context also starts multiprocessing's resource tracker: the collector is the other child
    kids = [
        p
        for p in last["processes"]
        if p["ppid"] == root_pid and not any("resource_tracker" in a for a in p["cmdline"])
    ]
    return max(kids, key=lambda p: p["rss_bytes"]) if kids else None


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_sigkill_of_the_collector_is_collector_failure_and_leaves_nothing(tmp_path: Path) -> None:
    argv, output = _soak_run_argv(tmp_path, iterations=100000, min_duration=0)
    monitor = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = output.with_name(output.stem + ".samples.jsonl")
    collector = None
    deadline = time.monotonic() + 300
    try:
        while collector is None and time.monotonic() < deadline and monitor.poll() is None:
            time.sleep(0.5)
            first = json.loads(samples.read_text().splitlines()[0]) if samples.exists() else None
            if first:
                collector = _collector(samples, first["processes"][0]["pid"])
        assert collector is not None, "no collector process appeared"
        os.kill(collector["pid"], signal.SIGKILL)
        out, err = monitor.communicate(timeout=300)
    finally:
        if monitor.poll() is None:  # SIGTERM lets the monitor stop the trainer's process group first
            monitor.terminate()
            monitor.wait(timeout=120)
    outcome = SoakOutcome(monitor.returncode, out, err, output)
    art = outcome.artifact
    assert monitor.returncode == 1, err[-3000:]
    assert art["trainer_returncode"] not in (0, None)
    assert art["failure_classification"] == "collector_failure"
    assert art["shutdown"]["classification"] == "collector_failure"
    assert art["post_shutdown_residual_processes"] == [] and art["orphaned_shm_segments"] == []
    assert not alive(collector["pid"], collector["start_ticks"])
    assert_nothing_left(outcome)
    assert run_segments(outcome) == []
