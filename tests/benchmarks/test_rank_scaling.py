"""benchmarks/rank_scaling.py end to end at a tiny size (slow): real 1- and 2-rank trainers under torchrun
and two gloo ranks timing the update and its all-reduce give complete, self-consistent figures (no speed is
asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.linux_only]
QUICK = ("algo.prefill_iterations=2", "algo.learning_starts=16", "algo.batch_size=16",
         "algo.updates_per_iteration=1", "training.physics_threads=1")  # fmt: skip


def test_the_benchmark_measures_both_sizes_and_the_all_reduce_in_one_run() -> None:
    argv = [sys.executable, "benchmarks/rank_scaling.py", "--num-envs", "8", "--iterations", "8", "--repeats", "1",
            "--timed-updates", "2", *(arg for item in QUICK for arg in ("--override", item))]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    collective = report["collective"]
    assert collective["backend"] == "gloo"
    assert 0 < collective["all_reduce_ms"] < collective["update_ms"]
    assert collective["all_reduce_share"] == pytest.approx(
        collective["all_reduce_ms"] / collective["update_ms"]
    )
    trainer = report["trainer"]
    assert [run["ranks"] for run in trainer["runs"]["1"]] == [1] and trainer["runs"]["2"][0]["ranks"] == 2
    assert trainer["runs"]["2"][0]["worlds_per_rank"] == 4 and trainer["runs"]["1"][0]["worlds_per_rank"] == 8
    one, two = trainer["median"]["1"], trainer["median"]["2"]
    assert one["env_steps_per_s"] > 0 and two["updates_per_s_per_rank"] > 0
    assert trainer["env_steps_ratio_2_over_1"] == pytest.approx(
        two["env_steps_per_s"] / one["env_steps_per_s"]
    )


def test_an_odd_world_count_is_refused_before_anything_runs() -> None:
    argv = [sys.executable, "benchmarks/rank_scaling.py", "--num-envs", "7"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--num-envs 7: must be even" in done.stderr
