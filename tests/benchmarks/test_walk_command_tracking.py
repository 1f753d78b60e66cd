"""benchmarks/walk_command_tracking.py on a real (barely trained) SAC g1_walk_flat run: the figures it
prints are consistent with each other, and a run of another task is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "walk_command_tracking.py"


def _train(log_dir: Path, task: str) -> Path:
    cmd = [
        sys.executable, "-m", "runtime.cli", "--algo", "sac", "--task", task, "--sim", "mujoco",
        "algo.num_envs=4", "algo.max_iterations=3", "algo.prefill_iterations=1", "algo.learning_starts=4",
        "training.no_play=true", "training.physics_threads=1", f"log_dir={log_dir}",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return log_dir


def _track(run: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # the refusal's rich box on one line
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(run), *flags], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.slow
def test_the_trained_error_and_the_standing_error_are_measured_on_the_same_steps(tmp_path: Path) -> None:
    run = _train(tmp_path / "walk", "g1_walk_flat")
    done = _track(run, "--envs", "4", "--horizon", "40")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["run_dir"] == "walk" and result["worlds"] == 4 and result["horizon"] == 40
    assert 4 <= result["world_steps_judged"] <= 160  # every world judged at least on its first step
    assert 0.0 <= result["fraction_fallen"] <= 1.0
    trained, still = result["velocity_error_mps"]["trained"], result["velocity_error_mps"]["standing_still"]
    assert trained >= 0.0 and still > 0.0  # commands are drawn from non-degenerate ranges
    assert result["error_ratio"] == pytest.approx(trained / still)


@pytest.mark.slow
def test_a_run_of_another_task_is_refused(tmp_path: Path) -> None:
    run = _train(tmp_path / "tracking", "g1_motion_tracking")
    done = _track(run, "--envs", "2", "--horizon", "5")
    assert done.returncode == 2
    assert "only g1_walk_flat has velocity commands" in done.stderr
