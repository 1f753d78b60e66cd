"""survival_lengths: first-episode length per world, censored at the horizon; read_checkpoint names the
path of a checkpoint that is missing or unreadable; restore_run restores a checkpoint's learner at the
evaluation's size and refuses a run of another task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from soakbench.runtime.config import compose, validate_for_run
from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.evaluation import (
    POLICIES,
    CheckpointError,
    TaskMismatchError,
    cpu_env,
    evaluate_run,
    read_checkpoint,
    restore_run,
    survival_lengths,
)
from soakbench.runtime.tasks.g1_motion_tracking import G1MotionTracking
from soakbench.runtime.tasks.g1_walk_flat import G1WalkFlat
from tests.runtime._platforms import LINUX_CPU


@dataclass
class _Out:
    obs: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor


class _Env:
    """World i falls after fall_at[i] steps (0 = never), then auto-resets and falls again."""

    def __init__(self, fall_at: list[int]) -> None:
        self.fall_at = torch.tensor(fall_at)
        self.num_envs = len(fall_at)
        self.t = torch.zeros(self.num_envs, dtype=torch.long)
        self.steps = 0

    def reset(self) -> torch.Tensor:
        self.t.zero_()
        return torch.zeros(self.num_envs, 1)

    def step(self, actions: torch.Tensor, timer: Any = None) -> _Out:
        assert actions.shape == (self.num_envs, 1)
        self.steps += 1
        self.t += 1
        done = (self.fall_at > 0) & (self.t >= self.fall_at)
        self.t[done] = 0  # auto-reset: later episodes must not overwrite the first length
        return _Out(torch.zeros(self.num_envs, 1), done, torch.zeros_like(done))


def test_first_episode_lengths_censored_at_horizon() -> None:
    env = _Env([3, 0, 10, 1])
    lengths = survival_lengths(env, lambda o: torch.zeros(o.shape[0], 1), horizon=8)  # type: ignore[arg-type]
    assert lengths.tolist() == [3.0, 8.0, 8.0, 1.0]
    assert env.steps == 8


def test_stops_once_every_world_has_fallen() -> None:
    env = _Env([2, 4])
    lengths = survival_lengths(env, lambda o: torch.zeros(o.shape[0], 1), horizon=100)  # type: ignore[arg-type]
    assert lengths.tolist() == [2.0, 4.0]
    assert env.steps == 4


def test_rejects_empty_horizon() -> None:
    with pytest.raises(ValueError, match="horizon"):
        survival_lengths(_Env([1]), lambda o: o, horizon=0)  # type: ignore[arg-type]


def test_a_missing_checkpoint_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"checkpoints/final\.pt: no such checkpoint"):
        read_checkpoint(tmp_path)


def test_an_unreadable_checkpoint_is_named(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "iter_10.pt").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match=r"iter_10\.pt: not a readable checkpoint"):
        read_checkpoint(tmp_path, "iter_10.pt")


def test_a_checkpoint_payload_round_trips(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    torch.save({"total_env_steps": 96, "learner": {}}, tmp_path / "checkpoints" / "final.pt")
    assert read_checkpoint(tmp_path)["total_env_steps"] == 96


def _walk_checkpoint(run_dir: Path) -> dict[str, torch.Tensor]:
    """A sac g1_walk_flat checkpoint written the trainer's way; returns the learner's actor weights."""
    cfg = validate_for_run(compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={run_dir}"]), LINUX_CPU)
    probe = cpu_env(cfg.with_num_envs(2), seed=0)  # the dims of the real task, as the trainer's
    obs_dim, action_dim = probe.obs_dim, probe.action_dim
    probe.close()
    assert cfg.seed != 7  # so the saved actor differs from the run's untrained one
    learner = build_learner(cfg.algo, obs_dim, action_dim, torch.device("cpu"), seed=7)
    (run_dir / "checkpoints").mkdir(parents=True)
    payload = {"total_env_steps": 2048, "learner": learner.state_dict(), "config": cfg.to_dict()}
    torch.save(payload, run_dir / "checkpoints" / "final.pt")
    return {k: v.clone() for k, v in learner.actor.state_dict().items()}


def test_a_run_is_restored_at_the_evaluations_size(tmp_path: Path) -> None:
    weights = _walk_checkpoint(tmp_path / "run")
    run = restore_run(tmp_path / "run", num_envs=3, task=G1WalkFlat)
    assert run.total_env_steps == 2048 and run.cfg.algo.num_envs == 3
    restored = run.learner.actor.state_dict()
    assert all(torch.equal(restored[k], v) for k, v in weights.items())
    assert not run.learner.actor.training
    untrained = run.untrained_learner().actor.state_dict()
    assert not all(torch.equal(untrained[k], v) for k, v in weights.items())
    env = run.make_env(seed=1)
    try:
        assert env.num_envs == 3 and isinstance(env, G1WalkFlat)
    finally:
        env.close()


def test_a_run_of_another_task_is_refused_by_name(tmp_path: Path) -> None:
    _walk_checkpoint(tmp_path / "run")
    with pytest.raises(TaskMismatchError, match=r"run: a G1WalkFlat run, not G1MotionTracking"):
        restore_run(tmp_path / "run", num_envs=2, task=G1MotionTracking)


def test_an_evaluation_computes_only_the_policies_it_is_asked_for(tmp_path: Path) -> None:
    _walk_checkpoint(tmp_path / "run")
    asked = ("trained_deterministic", "uniform_random")
    result = evaluate_run(tmp_path / "run", num_envs=2, horizon=3, policies=asked)
    assert [name for name in POLICIES if name in result] == list(asked)
    assert all(1.0 <= result[name]["mean"] <= 3.0 for name in asked)
    full = evaluate_run(tmp_path / "run", num_envs=2, horizon=3)
    assert all(name in full for name in POLICIES)
    assert full["trained_deterministic"] == result["trained_deterministic"]  # same worlds, same seed
    with pytest.raises(ValueError, match="policies must be a non-empty subset"):
        evaluate_run(tmp_path / "run", num_envs=2, horizon=3, policies=("random",))
