"""Real runs of the CPU cells that no other test covers: for sac/g1_motion_tracking,
flashsac/g1_walk_flat and flashsac/g1_motion_tracking on MuJoCo, a short `train` run that completes and
accounts for every slot, an injected learner fault that is classified and leaves nothing behind, and a
short `soak run` that passes its pass table. sac/g1_walk_flat has its own (tests/benchmarks/test_learning_smoke.py,
tests/runtime/test_train_faults.py, tests/harness/soak/test_driver_real.py).

Sizes: 16 envs; FlashSAC gets CPU-sized batches (as in scripts/matrix/collect_cpu_evidence.sh) so that its
learner updates within the run. The soak samples every 0.5 s and runs SAC for 1500 iterations, FlashSAC
for 200: measured on the shared 2-core host at 16 envs, SAC ran 30-75 iterations/s and FlashSAC 2
iterations/s (so 20-50 s and ~100 s), and a host four times as fast still leaves the leak verdicts
more than 30 post-start-up samples.

The `train` check of a cell reads the run that cell's soak made (the same `train` command, spawned and
watched by `soak run`): one real run per cell serves both, through a module fixture, and the module
runs on one xdist worker so the run is made once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.verdicts.gpu import GPU_ROWS
from soakbench.runtime.artifacts import read_run_summary
from soakbench.runtime.manager.shm import list_segments

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cell-runs")]
REPO = Path(__file__).resolve().parents[2]
NUM_ENVS = 16
FLASHSAC_CPU = ("algo.batch_size=256", "algo.learning_starts=512")
SOAK_ITERATIONS = {"sac": 1500, "flashsac": 200}


def _overrides(algo: str) -> tuple[str, ...]:
    return FLASHSAC_CPU if algo == "flashsac" else ()


TRAIN = [
    pytest.param("sac", "g1_motion_tracking", marks=pytest.mark.cell("sac", "g1_motion_tracking", "mujoco", kind="train")),
    pytest.param("flashsac", "g1_walk_flat", marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="train")),
    pytest.param("flashsac", "g1_motion_tracking", marks=pytest.mark.cell("flashsac", "g1_motion_tracking", "mujoco", kind="train")),
]  # fmt: skip
FAULT = [
    pytest.param("sac", "g1_motion_tracking", marks=pytest.mark.cell("sac", "g1_motion_tracking", "mujoco", kind="fault")),
    pytest.param("flashsac", "g1_walk_flat", marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="fault")),
    pytest.param("flashsac", "g1_motion_tracking", marks=pytest.mark.cell("flashsac", "g1_motion_tracking", "mujoco", kind="fault")),
]  # fmt: skip
SOAK = [
    pytest.param("sac", "g1_motion_tracking", marks=pytest.mark.cell("sac", "g1_motion_tracking", "mujoco", kind="soak")),
    pytest.param("flashsac", "g1_walk_flat", marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="soak")),
    pytest.param("flashsac", "g1_motion_tracking", marks=pytest.mark.cell("flashsac", "g1_motion_tracking", "mujoco", kind="soak")),
]  # fmt: skip


def _train(algo: str, task: str, log_dir: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run `train` to its end; its exit code and run summary. No shared-memory segment may outlive it."""
    cmd = [
        sys.executable, "-m", "soakbench.runtime.cli", "--algo", algo, "--task", task, "--sim", "mujoco",
        f"algo.num_envs={NUM_ENVS}", "training.no_play=true", "training.physics_threads=1",
        f"log_dir={log_dir}", *_overrides(algo), *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=540)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (log_dir / "run_summary.json").exists(), output[-3000:]
    assert [n for n in list_segments() if n.startswith(f"soakbench_{proc.pid}_")] == []
    return proc.returncode, read_run_summary(log_dir / "run_summary.json")


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("algo", "task"), TRAIN)
@pytest.mark.linux_only
def test_train_completes_and_accounts_for_every_slot(algo: str, task: str, soaked: Soaked) -> None:
    run = soaked(algo, task)
    summary = read_run_summary(run.log_dir / "run_summary.json")
    assert summary["status"] == "completed", (summary["failure_reason"], run.stderr[-3000:])
    assert run.artifact["run_status"] == "completed"  # what the monitor saw the trainer end as
    manifest = summary["runtime_manifest"]
    assert manifest["shutdown"]["classification"] == "normal_completion"
    assert summary["total_env_steps"] == NUM_ENVS * SOAK_ITERATIONS[algo]
    assert summary["learner_updates"] > 0  # the learner really trained, not only collected
    replay = manifest["replay_ingress"]
    assert replay["published_sequence"] == replay["release_sequence"] > 0
    assert replay["final_occupancy"] == 0 and replay["dropped_batches"] == 0
    assert list(run.log_dir.glob("events.out.tfevents.*"))
    assert run.leftover_segments == []  # no shared-memory segment of the trainer outlived it


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("algo", "task"), FAULT)
def test_injected_learner_fault_is_classified(algo: str, task: str, tmp_path: Path) -> None:
    code, summary = _train(
        algo, task, tmp_path / "run", "algo.max_iterations=100000",
        "training.test_fault=learner_exception", "training.test_fault_iteration=6",
    )  # fmt: skip
    assert code == 1, summary["failure_reason"]
    shutdown = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "failed" and summary["failure_classification"] == "learner_failure"
    assert shutdown["classification"] == "learner_failure" and shutdown["owner"] == "learner"
    assert shutdown["cleanup"]["errors"] == []
    assert summary["iterations"] == 6
    assert summary["runtime_manifest"]["collector"]["exitcode"] == 0  # stopped by the trainer, not crashed


@dataclass(frozen=True)
class SoakRun:
    """One `soak run` of a cell: its exit code, stderr, artifact and the trainer's log folder."""

    returncode: int
    stderr: str
    artifact: dict[str, Any]
    log_dir: Path
    leftover_segments: list[str]


Soaked = Callable[[str, str], SoakRun]


def _soak(algo: str, task: str, tmp: Path) -> SoakRun:
    output = tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "run",
        "--algo", algo, "--task", task, "--sim", "mujoco",
        "--num-envs", str(NUM_ENVS), "--iterations", str(SOAK_ITERATIONS[algo]),
        "--min-duration-seconds", "1", "--sample-interval-seconds", "0.25", "--min-trend-samples", "8",
        "--startup-timeout-seconds", "240", "--stale-progress-seconds", "120",
        "--post-shutdown-grace-seconds", "2", "--termination-grace-seconds", "20",
        "--shm-attribution", "evidence", "--live", "plain",
        "--extra-override", "training.heartbeat_seconds=1",
        *(arg for override in _overrides(algo) for arg in ("--extra-override", override)),
        "--log-dir", str(tmp / "run"), "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=850, check=False)
    art = json.loads(output.read_text())
    trainer_pids = {p["pid"] for p in art["monitor"]["known_processes"]}
    left = [n for n in list_segments() if any(n.startswith(f"soakbench_{pid}_") for pid in trainer_pids)]
    return SoakRun(done.returncode, done.stderr, art, tmp / "run", left)


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Soaked:
    """The soak of a cell, run on first use and shared by that cell's train and soak checks."""
    runs: dict[tuple[str, str], SoakRun] = {}

    def get(algo: str, task: str) -> SoakRun:
        if (algo, task) not in runs:
            runs[algo, task] = _soak(algo, task, tmp_path_factory.mktemp(f"soak-{algo}-{task}"))
        return runs[algo, task]

    return get


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("algo", "task"), SOAK)
@pytest.mark.linux_only
def test_short_soak_passes_its_pass_table(algo: str, task: str, soaked: Soaked) -> None:
    run = soaked(algo, task)
    art = run.artifact
    assert run.returncode == 0, (art["failure_reason"], run.stderr[-3000:])
    assert art["status"] == "passed" and art["run_status"] == "completed"
    assert art["run_settings"]["algo"] == algo and art["run_settings"]["task"] == task
    # the GPU rows judge the card, not the trainer: on a CPU host they do not apply (NVML's reason)
    # without --must-survive the survival row is information: each class projected to its limit
    ungated = ("leak_verdicts", "throughput_drift", "survival", *GPU_ROWS)
    judged = [c for c in art["criteria"] if c["name"] not in ungated]
    assert all(c["result"] == "pass" for c in judged), [c for c in judged if c["result"] != "pass"]
    assert art["survival"]["verdict"] == "no_target"
    assert {"pss", "fds"} <= {c["class"] for c in art["survival"]["classes"]}
    assert {c["result"] for c in art["criteria"] if c["name"] in GPU_ROWS} <= {"pass", "not_applicable"}
    assert next(c for c in art["criteria"] if c["name"] == "throughput_drift")["result"] == "not_applicable"
    assert "growing" not in art["resource_summary"]["leak_verdicts"].values()
    assert art["replay"]["release_sequence"] == art["replay"]["published_sequence"] > 0
    assert art["post_shutdown_residual_processes"] == [] and art["orphaned_shm_segments"] == []
