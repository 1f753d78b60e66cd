"""Builds real task envs (composed config -> MuJoCo CPU backend) for the task tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from runtime.config import compose
from runtime.env import make_env
from runtime.tasks.base import TaskEnv

EnvFactory = Callable[..., TaskEnv]


@pytest.fixture
def env_factory() -> Iterator[EnvFactory]:
    """``env_factory(task, num_envs, *overrides, seed=0)``; every env is closed at teardown."""
    made: list[TaskEnv] = []

    def build(task: str, num_envs: int, *overrides: str, seed: int = 0) -> TaskEnv:
        cfg = compose(
            "sac", task, "mujoco", [f"algo.num_envs={num_envs}", "training.physics_threads=1", *overrides]
        )
        env = make_env(cfg, seed=seed)
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()
