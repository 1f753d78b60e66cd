"""The first death in a failed tree is named (slow, real processes): a killed worker of a pool, and a
killed rank of a torchrun job, which makes the failure a rank_failure naming that rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soakbench.matrix.grading.rederive import disagreements
from tests.harness.soak._soakrun import FAULTS, REPO, SoakOutcome, assert_nothing_left, monitor_args

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]


def _wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


def test_a_killed_worker_is_named_as_the_first_death(tmp_path: Path) -> None:
    argv, output = monitor_args(tmp_path, "worker_pool.py", stale=30.0, startup=30.0)
    monitor = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = tmp_path / "run" / "workers.json"
    _wait_for(workers)
    time.sleep(2.0)  # a few samples with every worker alive
    victim = json.loads(workers.read_text())[1]
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = monitor.communicate(timeout=120)
    art = SoakOutcome(monitor.returncode, stdout, stderr, output).artifact
    reason = art["failure_reason"]
    assert art["failure_classification"] == "trainer_failure", reason
    assert f"first death: pid {victim} (" in reason, reason
    if art["oom"]["fork_events"]["used"]:  # the kernel's exit event gives the status its parent reaped
        assert "(the kernel's exit event)" in reason and "; killed by SIGKILL" in reason, reason
    else:
        assert "exit status not observable (reaped by its own parent)" in reason
    assert_nothing_left(SoakOutcome(monitor.returncode, stdout, stderr, output))


def test_a_killed_rank_of_a_torchrun_job_is_a_rank_failure_naming_it(tmp_path: Path) -> None:
    log_dir, output = tmp_path / "run", tmp_path / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120", "--stale-progress-seconds", "60",
        "--min-duration-seconds", "0", "--live", "plain", "--shm-attribution", "evidence", "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(FAULTS / "ranks_job.py"), str(log_dir), "run",
    ]  # fmt: skip
    monitor = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = log_dir / "rank-1" / "progress.jsonl"
    _wait_for(progress, 120.0)
    time.sleep(2.0)
    samples = [json.loads(line) for line in output.with_name("soak.samples.jsonl").read_text().splitlines()]
    rank1 = next(p["pid"] for p in samples[-1]["processes"] if p.get("rank") == 1)
    os.kill(rank1, signal.SIGKILL)
    stdout, stderr = monitor.communicate(timeout=120)
    outcome = SoakOutcome(monitor.returncode, stdout, stderr, output)
    reason = outcome.artifact["failure_reason"]
    assert outcome.artifact["failure_classification"] == "rank_failure", reason
    if outcome.artifact["oom"]["fork_events"]["used"]:
        # the kernel's exit events order the killed rank before the peer it took down, even in one interval
        assert f"; first death: rank 1 pid {rank1} (" in reason and "killed by SIGKILL" in reason, reason
        (entry,) = [r for r in outcome.artifact["ranks"]["ranks"] if r["rank"] == 1]
        assert [p.get("returncode") for p in entry["processes"] if p["pid"] == rank1] == [-signal.SIGKILL]
    else:  # without them, both are named when they went in one 0.25 s interval
        death = reason.split("; first death: ", 1)[1].split(" went between", 1)[0]
        assert f"rank 1 pid {rank1} (" in death, reason
    # the matrix re-derives the verdict from the samples and agrees, rank_failure included
    recorded = [json.loads(line) for line in output.with_name("soak.samples.jsonl").read_text().splitlines()]
    assert disagreements(outcome.artifact, recorded) == []
    assert_nothing_left(outcome)
