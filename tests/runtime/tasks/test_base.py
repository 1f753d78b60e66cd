"""The penalty terms every task shares (pure)."""

from __future__ import annotations

import torch

from runtime.tasks.base import action_terms


def test_action_terms_penalize_action_change_and_excess_beyond_soft_limits() -> None:
    action = torch.tensor([[0.5, 0.0], [0.0, 0.0]])
    last_action = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    joint_pos = torch.tensor([[0.0, 0.0], [1.5, -1.25]])  # row 1: 0.5 above and 0.25 below the soft range
    terms = action_terms(action, last_action, joint_pos, -torch.ones(2), torch.ones(2))
    assert list(terms) == ["action_rate", "joint_limits"]
    torch.testing.assert_close(terms["action_rate"], torch.tensor([0.25, 0.0]))
    torch.testing.assert_close(terms["joint_limits"], torch.tensor([0.0, 0.75]))
