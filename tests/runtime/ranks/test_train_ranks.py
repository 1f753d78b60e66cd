"""The real trainer as a 2-rank job on CPU (gloo): under torchrun it trains with identical parameters
on both ranks and writes each rank's artifacts; a killed rank ends its peer as a peer_failure without a
hang; a rank that fails is the one the job summary names; a partial launch is refused before anything
is written."""

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
from torch.distributed.elastic.utils.distributed import get_free_port

from soakbench.runtime.artifacts import read_run_summary

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ROUTE = ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco"]
# Lifecycle scale: 8 worlds per rank, one update per iteration, learning from the 5th iteration.
SMALL = [
    "algo.num_envs=8", "algo.prefill_iterations=4", "algo.batch_size=32", "algo.learning_starts=32",
    "algo.updates_per_iteration=1", "training.no_play=true", "training.group_exit_deadline_s=10",
]  # fmt: skip


# rank 1 raises in its learner at iteration 10 (the first attempt only; the other rank runs clean)
RANK_1_FAULT = (
    "training.test_fault=learner_exception",
    "training.test_fault_iteration=10",
    "training.test_fault_rank=1",
)


def _torchrun_train(job: Path, *settings: str, restarts: int = 0) -> list[str]:
    """The 2-rank trainer under torchrun, at the lifecycle scale, writing the job ``job``."""
    launcher = [*TORCHRUN, "--max-restarts", str(restarts)]
    return [*launcher, "-m", "soakbench.runtime.cli", *ROUTE, f"log_dir={job}", *settings, *SMALL]


def _env(**extra: str) -> dict[str, str]:
    drop = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return {k: v for k, v in os.environ.items() if k not in drop} | extra


def _no_process_mentions(log_dir: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = [
            p for p in psutil.process_iter(["cmdline"]) if str(log_dir) in " ".join(p.info["cmdline"] or [])
        ]
        if not left:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes of the job outlived it: {[p.pid for p in left]}")


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train", ranks=2)
def test_two_ranks_under_torchrun_train_with_identical_parameters(tmp_path: Path) -> None:
    job = tmp_path / "job"
    cmd = _torchrun_train(job, "seed=5", "algo.max_iterations=24")
    result = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_run_summary(job / "run_summary.json")  # schema-validated
    dist = summary["distributed"]
    assert summary["status"] == "completed" and dist["world_size"] == 2 and dist["backend"] == "gloo"
    assert [r["status"] for r in dist["ranks"]] == ["completed", "completed"]
    assert dist["params_identical"] is True and dist["run_id"]
    for rank in (0, 1):
        own = read_run_summary(job / f"rank-{rank}" / "run_summary.json")
        assert own["distributed"]["rank"] == rank and "ranks" not in own["distributed"]
        assert own["total_env_steps"] == 24 * 8
        config = json.loads((job / f"rank-{rank}" / "run_config.json").read_text())["config"]
        assert config["seed"] == 5 + rank
        assert (job / f"rank-{rank}" / "progress.jsonl").is_file()
    assert sorted(p.name for p in job.iterdir()) == ["rank-0", "rank-1", "run_summary.json"]
    assert list((job / "rank-0").glob("events.out.tfevents.*")) and (job / "rank-0" / "checkpoints").is_dir()
    assert not list((job / "rank-1").glob("events.out.tfevents.*"))
    assert not (job / "rank-1" / "checkpoints").exists()
    _no_process_mentions(job)


def test_world_size_without_the_other_launch_variables_exits_2_before_anything_is_written(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "soakbench.runtime.cli", *ROUTE, f"log_dir={job}"]
    result = subprocess.run(
        cmd, cwd=REPO, env=_env(WORLD_SIZE="2"), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "WORLD_SIZE set without RANK" in " ".join(result.stderr.split())
    assert not job.exists()


def _iteration(progress: Path) -> int:
    lines = progress.read_text().splitlines() if progress.exists() else []
    return int(json.loads(lines[-1])["iteration"]) if lines else 0


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault", ranks=2)
def test_a_rank_killed_mid_training_ends_its_peer_as_peer_failure_without_a_hang(tmp_path: Path) -> None:
    job = tmp_path / "job"
    base = _env(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(get_free_port()), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2"
    )
    cmd = [
        sys.executable,
        "-m",
        "soakbench.runtime.cli",
        *ROUTE,
        f"log_dir={job}",
        "algo.max_iterations=100000",
        *SMALL,
    ]
    ranks = [
        subprocess.Popen(cmd, cwd=REPO, env=base | {"RANK": str(r), "LOCAL_RANK": str(r)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for r in (0, 1)
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while _iteration(job / "rank-1" / "progress.jsonl") < 8:  # past prefill: updates all-reduce
            assert time.monotonic() < deadline and all(p.poll() is None for p in ranks)
            time.sleep(0.2)
        ranks[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        code = ranks[0].wait(timeout=120)
        ended_after = time.monotonic() - killed
    finally:
        for proc in ranks:
            proc.kill()
    assert code == 1, ranks[0].stderr.read().decode()[-2000:] if ranks[0].stderr else ""
    own = read_run_summary(job / "rank-0" / "run_summary.json")
    assert own["failure_classification"] == "peer_failure"
    assert own["runtime_manifest"]["shutdown"]["owner"] == "peer"
    assert "Connection closed by peer" in own["failure_reason"] or "timeout" in own["failure_reason"]
    job_summary = read_run_summary(job / "run_summary.json")
    assert job_summary["failure_reason"].startswith("rank 1 left no run summary")
    assert [r["status"] for r in job_summary["distributed"]["ranks"]] == ["failed", "missing"]
    assert ended_after < 60, f"rank 0 took {ended_after:.0f} s to end after its peer was killed"
    _no_process_mentions(job)


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault", ranks=2)
def test_the_rank_that_fails_is_named_not_the_peer_it_took_down(tmp_path: Path) -> None:
    job = tmp_path / "job"
    cmd = _torchrun_train(job, "algo.max_iterations=100000", *RANK_1_FAULT)
    env = _env()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode != 0
    job_summary: dict[str, Any] = read_run_summary(job / "run_summary.json")
    assert job_summary["failure_classification"] == "learner_failure"
    assert job_summary["failure_reason"].startswith("rank 1: injected learner exception at iteration 10")
    survivor = job_summary["distributed"]["ranks"][0]
    assert survivor["failure_classification"] in ("peer_failure", "external_cancellation")
    _no_process_mentions(job)


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault", ranks=2)
def test_an_elastic_restart_of_the_trainer_forms_its_group_again_and_completes(tmp_path: Path) -> None:
    job = tmp_path / "job"
    cmd = _torchrun_train(job, "algo.max_iterations=20", *RANK_1_FAULT, restarts=1)
    result = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_run_summary(job / "run_summary.json")
    assert summary["status"] == "completed" and summary["distributed"]["restart_count"] == 1
    assert summary["distributed"]["params_identical"] is True
    _no_process_mentions(job)
