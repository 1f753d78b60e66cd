"""survival_lengths: first-episode length per world, censored at the horizon; read_checkpoint names the
path of a checkpoint that is missing or unreadable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from runtime.learners.evaluation import CheckpointError, read_checkpoint, survival_lengths


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
