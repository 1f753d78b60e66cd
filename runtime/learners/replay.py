"""Learner-side replay buffer: a ring of transitions resident on the learner device.

The manager copies each released ingress slot in with ``add``; the learner samples uniform batches.
Shapes: n = rows added, O = obs_dim, A = action_dim, B = batch rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Batch:
    """A sampled batch: obs [B, O], action [B, A], reward [B], next_obs [B, O], terminated [B] (float 0/1)."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor


def check_transitions(rows: Batch, obs_dim: int, action_dim: int) -> int:
    """Validate one block of transitions; returns n. Raises ValueError naming the offending field."""
    n = rows.obs.shape[0] if rows.obs.dim() == 2 else -1
    expected = {
        "obs": (rows.obs, (n, obs_dim)),
        "action": (rows.action, (n, action_dim)),
        "reward": (rows.reward, (n,)),
        "next_obs": (rows.next_obs, (n, obs_dim)),
        "terminated": (rows.terminated, (n,)),
    }
    for name, (tensor, shape) in expected.items():
        if n < 0 or tuple(tensor.shape) != shape:
            raise ValueError(
                f"add_transitions: {name} has shape {tuple(tensor.shape)}, expected {shape} "
                f"(n rows, obs_dim={obs_dim}, action_dim={action_dim})"
            )
    return n


class ReplayBuffer:
    """Fixed-capacity FIFO ring on ``device``; ``add`` overwrites the oldest rows once full."""

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device) -> None:
        if capacity < 1:
            raise ValueError(f"algo.replay_capacity must be >= 1, got {capacity}")
        self.capacity, self.obs_dim, self.action_dim, self.device = capacity, obs_dim, action_dim, device
        self.obs = torch.zeros(capacity, obs_dim, device=device)
        self.action = torch.zeros(capacity, action_dim, device=device)
        self.reward = torch.zeros(capacity, device=device)
        self.next_obs = torch.zeros(capacity, obs_dim, device=device)
        self.terminated = torch.zeros(capacity, device=device)
        self.cursor = 0  # next row to write
        self.size = 0  # valid rows
        self.total_added = 0

    def add(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Copy n rows in (obs [n, O], action [n, A], reward [n], next_obs [n, O], terminated [n] bool/float).

        Copies, so the caller may reuse its (shared-memory) source tensors immediately afterwards."""
        n = check_transitions(Batch(obs, action, reward, next_obs, terminated), self.obs_dim, self.action_dim)
        self.total_added += n
        start = 0
        if n > self.capacity:  # only the newest `capacity` rows can survive
            start, n = n - self.capacity, self.capacity
        idx = (torch.arange(n, device=self.device) + self.cursor) % self.capacity
        for dst, src in (
            (self.obs, obs),
            (self.action, action),
            (self.reward, reward),
            (self.next_obs, next_obs),
            (self.terminated, terminated),
        ):
            dst[idx] = src[start:].to(self.device, dtype=torch.float32, non_blocking=True)
        self.cursor = (self.cursor + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Uniform sample of ``batch_size`` rows with replacement; requires size > 0."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=generator.device)
        idx = idx.to(self.device)
        return Batch(
            self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.terminated[idx]
        )

    def state_dict(self) -> dict[str, object]:
        """Valid rows and cursor, for checkpoints."""
        return {
            "obs": self.obs[: self.size].clone(),
            "action": self.action[: self.size].clone(),
            "reward": self.reward[: self.size].clone(),
            "next_obs": self.next_obs[: self.size].clone(),
            "terminated": self.terminated[: self.size].clone(),
            "cursor": self.cursor,
            "size": self.size,
            "total_added": self.total_added,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        size = int(state["size"])  # type: ignore[call-overload]
        if size > self.capacity:
            raise ValueError(f"checkpoint replay holds {size} rows, capacity is {self.capacity}")
        for name in ("obs", "action", "reward", "next_obs", "terminated"):
            src = state[name]
            assert isinstance(src, torch.Tensor)
            getattr(self, name)[:size] = src.to(self.device)
        self.size, self.cursor = size, int(state["cursor"])  # type: ignore[call-overload]
        self.total_added = int(state["total_added"])  # type: ignore[call-overload]
