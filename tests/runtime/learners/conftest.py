"""Small learner configurations (real hyperparameter files, tiny networks) for fast CPU tests."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from soakbench.runtime.config import LearnerConfig, compose
from soakbench.runtime.learners.replay import Batch

OBS, ACT = 6, 3


def algo_cfg(algo: str, **overrides: Any) -> LearnerConfig:
    """The composed ``algo`` section of ``algo``'s owner with tiny networks and the given overrides
    (validated like a CLI override: ConfigError, a ValueError, names a bad one)."""
    small: dict[str, Any] = (
        {"actor_hidden": [32, 32], "critic_hidden": [32, 32]}
        if algo == "sac"
        else {"actor_hidden_dim": 16, "critic_hidden_dim": 16, "actor_blocks": 1, "critic_blocks": 1}
    )
    values: dict[str, Any] = {"batch_size": 64, "learning_starts": 64, "replay_capacity": 1000}
    values.update(small)
    values.update(overrides)
    items = [f"algo.{key}={json.dumps(value)}" for key, value in values.items()]
    return compose(algo, "g1_walk_flat", "mujoco", items).algo


def toy_batch(n: int = 64, seed: int = 0) -> Batch:
    """A fixed batch [n] of transitions with a reward that depends on obs and action."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, OBS, generator=g)
    action = torch.rand(n, ACT, generator=g) * 2 - 1
    reward = obs[:, 0] - action.pow(2).sum(-1)
    next_obs = obs + 0.1 * torch.randn(n, OBS, generator=g)
    terminated = (torch.rand(n, generator=g) < 0.1).float()
    return Batch(obs, action, reward, next_obs, terminated)


@pytest.fixture
def batch() -> Batch:
    return toy_batch()
