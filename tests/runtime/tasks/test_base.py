"""The penalty terms every task shares (pure)."""

from __future__ import annotations

import pytest
import torch

from soakbench.runtime.tasks.base import action_terms

from .conftest import EnvFactory


def test_action_terms_penalize_action_change_and_excess_beyond_soft_limits() -> None:
    action = torch.tensor([[0.5, 0.0], [0.0, 0.0]])
    last_action = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    joint_pos = torch.tensor([[0.0, 0.0], [1.5, -1.25]])  # row 1: 0.5 above and 0.25 below the soft range
    terms = action_terms(action, last_action, joint_pos, -torch.ones(2), torch.ones(2))
    assert list(terms) == ["action_rate", "joint_limits"]
    torch.testing.assert_close(terms["action_rate"], torch.tensor([0.25, 0.0]))
    torch.testing.assert_close(terms["joint_limits"], torch.tensor([0.0, 0.75]))


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_reward_is_the_weighted_sum_of_the_recorded_terms(env_factory: EnvFactory, task: str) -> None:
    """The reward's single matrix product equals the term-by-term weighted sum it replaces."""
    env = env_factory(task, 8)
    env.reset()
    actions = torch.rand(8, env.action_dim, generator=torch.Generator().manual_seed(1)) * 2 - 1
    out = env.step(actions)
    expected = sum(weight * env.last_terms[name] for name, weight in env.reward_weights.items())
    assert set(env.last_terms) == set(env.reward_weights)
    torch.testing.assert_close(out.reward, expected, rtol=1e-5, atol=1e-6)
