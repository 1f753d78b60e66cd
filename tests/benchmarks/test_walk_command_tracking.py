"""benchmarks/walk_command_tracking.py: its velocity error inverts the task's own tracking term, and on a
real (barely trained) SAC g1_walk_flat run the figures it prints are consistent with each other; a run of
another task, or without a readable final checkpoint, is refused with exit 2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch

from soakbench.runtime.tasks.g1_walk_flat import tracking_terms
from tests.benchmarks._runs import run_script, train_tiny_run

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "walk_command_tracking.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("walk_command_tracking", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_velocity_error_inverts_the_tasks_tracking_term() -> None:
    """Known commands and velocities through the task's own reward term come back as |cmd - v|."""
    command = torch.tensor([[1.0, 0.0, 0.0], [0.5, -0.3, 0.2], [0.0, 0.0, 0.0], [-0.5, 0.3, 0.0]])
    velocity = torch.tensor([[0.2, 0.1, 0.0], [0.5, -0.3, 0.0], [0.4, 0.3, 0.0], [0.0, 0.0, 0.0]])
    n = command.shape[0]
    terms = tracking_terms(
        command=command, lin_vel_heading=velocity, ang_vel_z=torch.zeros(n),
        projected_gravity=torch.tensor([[0.0, 0.0, -1.0]]).repeat(n, 1), base_height=torch.ones(n),
        stand_height=1.0,
    )  # fmt: skip
    expected = (command[:, :2] - velocity[:, :2]).norm(dim=-1)
    got = _module().velocity_error(terms["track_lin_vel_xy"])
    assert torch.allclose(got, expected, atol=1e-5), (got, expected)


@pytest.mark.slow
def test_the_trained_error_and_the_standing_error_are_measured_on_the_same_steps(tmp_path: Path) -> None:
    run = train_tiny_run(tmp_path / "walk", "sac", "g1_walk_flat")
    done = run_script(SCRIPT, run, "--envs", "4", "--horizon", "40")
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
    run = train_tiny_run(tmp_path / "tracking", "sac", "g1_motion_tracking")
    done = run_script(SCRIPT, run, "--envs", "2", "--horizon", "5")
    assert done.returncode == 2
    assert "only g1_walk_flat has velocity commands" in done.stderr


def test_a_run_without_a_readable_final_checkpoint_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_script(SCRIPT, empty)
    assert done.returncode == 2 and "no such checkpoint" in done.stderr, done.stderr
    (empty / "checkpoints").mkdir()
    (empty / "checkpoints" / "final.pt").write_bytes(b"not a checkpoint")
    done = run_script(SCRIPT, empty)
    assert done.returncode == 2 and "not a readable checkpoint" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
