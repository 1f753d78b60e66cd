"""Helpers of the tests that run a benchmark script on a real run: a tiny finished `train` run, and the
script run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def train_tiny_run(log_dir: Path, algo: str, task: str) -> Path:
    """A finished 4-env, 3-iteration run (a few learner updates) with a final checkpoint."""
    cmd = [
        sys.executable, "-m", "soakbench.runtime.cli", "--algo", algo, "--task", task, "--sim", "mujoco",
        "algo.num_envs=4", "algo.max_iterations=3", "algo.prefill_iterations=1", "algo.learning_starts=4",
        "algo.batch_size=4", "training.no_play=true", "training.physics_threads=1", f"log_dir={log_dir}",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return log_dir


def run_script(script: Path, run: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # a refusal's rich box on one line
    return subprocess.run(
        [sys.executable, str(script), str(run), *flags], capture_output=True, text=True, timeout=300, env=env
    )
