"""Builds real task envs (composed config -> MuJoCo CPU backend) for the task tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from soakbench.runtime.config import compose
from soakbench.runtime.env import make_env
from soakbench.runtime.tasks.base import TaskEnv

EnvFactory = Callable[..., TaskEnv]


@pytest.fixture
def env_factory() -> Iterator[EnvFactory]:
    """``env_factory(task, num_envs, *overrides, seed=0)``; every env is closed at teardown.

    Torch runs single-threaded here: the physics threads own the cores, and intra-op worker threads
    competing with them make the small per-step tensor ops orders of magnitude slower."""
    made: list[TaskEnv] = []
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def build(task: str, num_envs: int, *overrides: str, seed: int = 0) -> TaskEnv:
        cfg = compose(
            "sac", task, "mujoco", [f"algo.num_envs={num_envs}", "training.physics_threads=1", *overrides]
        )
        env = make_env(cfg, seed=seed)
        made.append(env)
        return env

    try:
        yield build
    finally:
        for env in made:
            env.close()
        torch.set_num_threads(torch_threads)
