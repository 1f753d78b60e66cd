"""Test doubles for the manager: a tiny deterministic env (no physics) and env factories with faults.

Imported by the spawned collector through ``TrainerHooks.env_factory = "tests.runtime.manager.manager_fakes:<factory>"``
(pytest puts the repo root on sys.path; spawn children inherit sys.path).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

OBS_DIM, ACTION_DIM, EPISODE_LEN = 6, 3, 7


@dataclass(frozen=True)
class FakeStep:
    obs: torch.Tensor
    next_obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    episode_returns: torch.Tensor
    episode_lengths: torch.Tensor


class FakeBackend:
    backend_type = "fake"
    data_plane = "host_bridge"

    def get_tensor_runtime_diagnostics(self) -> dict[str, Any]:
        return {"batched_step": {"requested": True, "enabled": False, "disable_reason": "fake backend"}}


class FakeEnv:
    """obs = [t, row, mean(action) ...]; reward = -|action|^2; episodes end after EPISODE_LEN steps."""

    def __init__(
        self, num_envs: int, device: torch.device, step_sleep_s: float = 0.0, fail_at: int | None = None
    ):
        self.num_envs, self.obs_dim, self.action_dim = num_envs, OBS_DIM, ACTION_DIM
        self.device, self.semantic_name, self.backend = device, "Fake", FakeBackend()
        self.step_sleep_s, self.fail_at = step_sleep_s, fail_at
        self.t = torch.zeros(num_envs, device=device)
        self.ret = torch.zeros(num_envs, device=device)
        self.steps = 0

    def _obs(self, extra: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(self.num_envs, device=self.device, dtype=torch.float32)
        return torch.stack([self.t, rows, extra, extra * 2, torch.sin(self.t), torch.cos(self.t)], dim=1)

    def reset(self) -> torch.Tensor:
        return self._obs(torch.zeros(self.num_envs, device=self.device))

    def step(self, actions: torch.Tensor, timer: Any = None) -> FakeStep:
        self.steps += 1
        if self.fail_at is not None and self.steps >= self.fail_at:
            raise FloatingPointError(f"fake physics diverged at step {self.steps}")
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        reward = -(actions**2).sum(dim=1)
        self.t += 1
        self.ret += reward
        next_obs = self._obs(actions.mean(dim=1))
        done = self.t >= EPISODE_LEN
        returns, lengths = self.ret[done].clone(), self.t[done].clone()
        self.t[done] = 0
        self.ret[done] = 0
        obs = self._obs(actions.mean(dim=1))
        return FakeStep(obs, next_obs, reward, done.clone(), done.clone(), returns, lengths)

    def close(self) -> None:
        pass


def make_env(cfg: Any, *, device: torch.device | None = None, seed: int | None = None) -> FakeEnv:
    return FakeEnv(
        int(cfg.algo.num_envs),
        device or torch.device("cpu"),
        step_sleep_s=float(os.environ.get("FAKE_ENV_SLEEP_S", "0")),
    )


def make_failing_env(cfg: Any, *, device: torch.device | None = None, seed: int | None = None) -> FakeEnv:
    """Raises inside env.step at the 5th step (a backend-worker exception)."""
    return FakeEnv(int(cfg.algo.num_envs), device or torch.device("cpu"), fail_at=5)


def make_broken_env(cfg: Any, *, device: torch.device | None = None, seed: int | None = None) -> FakeEnv:
    raise RuntimeError("fake backend could not compile the model")


class SlowLearner:
    """A learner double whose update() blocks for ``update_s`` seconds (heartbeat-thread tests)."""

    def __init__(self, cfg: Any, obs_dim: int, action_dim: int, device: Any, update_s: float = 1.2) -> None:
        from soakbench.runtime.learners import build_actor

        self.actor = build_actor(cfg.algo, obs_dim, action_dim)
        self.updates_per_iteration = 1
        self.update_s = update_s

    def add_transitions(self, *batch: Any) -> None:
        pass

    def ready(self) -> bool:
        return True

    def update(self) -> dict[str, float]:
        time.sleep(self.update_s)
        return {}

    def runtime_diagnostics(self) -> dict[str, dict[str, Any]]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}
