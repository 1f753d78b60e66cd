"""benchmarks/motion_tracking_error.py: its errors invert the task's own tracking kernels, and on a real
(barely trained) FlashSAC g1_motion_tracking run the figures it prints are consistent with each other; a
run of another task, or without a readable final checkpoint, is refused with exit 2."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest
import torch

from soakbench.runtime.tasks.g1_motion_tracking import Bodies, tracking_terms
from tests.benchmarks._runs import run_script, train_tiny_run

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "motion_tracking_error.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("motion_tracking_error", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bodies(pos: torch.Tensor, quat: torch.Tensor) -> Bodies:
    zeros = torch.zeros_like(pos)
    return Bodies(pos, quat, zeros, zeros)


def test_the_errors_invert_the_tasks_tracking_kernels() -> None:
    """Known offsets through the task's own terms come back as the anchor distance and the body RMS errors."""
    n, b = 2, 3
    ref_pos = torch.zeros(n, b, 3)
    robot_pos = ref_pos.clone()
    robot_pos[0, :, 0] = torch.tensor([0.1, 0.2, 0.3])  # world 0: bodies off along x
    identity = torch.tensor([1.0, 0.0, 0.0, 0.0]).repeat(n, b, 1)
    half = math.radians(20.0) / 2  # world 1: every body turned 20 degrees about z
    turned = identity.clone()
    turned[1] = torch.tensor([math.cos(half), 0.0, 0.0, math.sin(half)])
    terms = tracking_terms(
        ref_anchor_pos=torch.zeros(n, 3), ref_anchor_quat=identity[:, 0],
        anchor_pos=torch.tensor([[0.0, 0.25, 0.0], [0.0, 0.0, 0.0]]), anchor_quat=turned[:, 0],
        reference=_bodies(ref_pos, identity), robot=_bodies(robot_pos, turned),
    )  # fmt: skip
    module = _module()
    errors = {k: module.kernel_error(terms[k], s) for k, s in module.KERNEL_SIGMA_SQ.items()}
    assert torch.allclose(errors["anchor_pos"], torch.tensor([0.25, 0.0]), atol=1e-4)
    rms = math.sqrt((0.01 + 0.04 + 0.09) / 3)
    assert torch.allclose(errors["body_pos"], torch.tensor([rms, 0.0]), atol=1e-4)
    assert torch.allclose(errors["body_ori"], torch.tensor([0.0, math.radians(20.0)]), atol=1e-3)


@pytest.mark.slow
def test_a_tracking_run_is_measured_against_its_untrained_actor(tmp_path: Path) -> None:
    run = train_tiny_run(tmp_path / "tracking", "flashsac", "g1_motion_tracking")
    done = run_script(SCRIPT, run, "--envs", "4", "--horizon", "30")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["run_dir"] == "tracking" and result["worlds"] == 4 and result["horizon"] == 30
    for policy in ("trained", "untrained"):
        figures = result[policy]
        assert 1.0 <= figures["episode_length_mean"] <= 30.0
        assert 0.0 <= figures["fraction_terminated"] <= 1.0
        # the worlds start on the reference pose, so the errors are small and finite
        assert 0.0 <= figures["anchor_position_m"] < 1.0
        assert 0.0 <= figures["body_position_rms_m"] < 1.0
        assert 0.0 <= figures["body_orientation_rms_rad"] < math.pi


@pytest.mark.slow
def test_a_run_of_another_task_is_refused(tmp_path: Path) -> None:
    run = train_tiny_run(tmp_path / "walk", "sac", "g1_walk_flat")
    done = run_script(SCRIPT, run, "--envs", "2", "--horizon", "5")
    assert done.returncode == 2
    assert "only g1_motion_tracking has a reference clip" in done.stderr


def test_a_run_without_a_readable_final_checkpoint_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_script(SCRIPT, empty)
    assert done.returncode == 2 and "no such checkpoint" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
