"""make_env: composed config -> model -> MuJoCo backend -> task, with fail-closed construction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from soakbench.runtime.assets import MotionClipError
from soakbench.runtime.backends.mujoco import MujocoBackend
from soakbench.runtime.config import ComposedConfig, compose
from soakbench.runtime.env import make_env
from soakbench.runtime.tasks.g1_motion_tracking import G1MotionTracking
from soakbench.runtime.tasks.g1_walk_flat import G1WalkFlat


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _cfg(task: str, *overrides: str, sim: str = "mujoco") -> ComposedConfig:
    return compose("sac", task, sim, ["algo.num_envs=3", "training.physics_threads=1", *overrides])


@pytest.mark.parametrize(
    ("task", "cls", "obs_dim", "semantic"),
    [
        ("g1_walk_flat", G1WalkFlat, 96, "G1WalkFlat"),
        ("g1_motion_tracking", G1MotionTracking, 160, "G1MotionTracking"),
    ],
)
def test_builds_task_on_mujoco_backend(task: str, cls: type, obs_dim: int, semantic: str) -> None:
    env = make_env(_cfg(task))
    try:
        assert isinstance(env, cls) and isinstance(env.backend, MujocoBackend)
        assert (env.num_envs, env.obs_dim, env.action_dim, env.semantic_name) == (3, obs_dim, 29, semantic)
        assert env.device == torch.device("cpu") and env.backend.decimation == 4
        assert env.backend.host_stepping_info()["num_threads"] == 1  # training.physics_threads
        assert env.reset().shape == (3, obs_dim)
        out = env.step(torch.zeros(3, 29))
        assert out.obs.shape == (3, obs_dim) and out.reward.dtype == torch.float32
    finally:
        env.close()


def test_seed_argument_overrides_cfg_seed() -> None:
    cfg = _cfg("g1_walk_flat", "seed=11")
    envs = [make_env(cfg), make_env(cfg, seed=11), make_env(cfg, seed=12)]
    try:
        a, b, c = (e.reset() for e in envs)
        assert torch.equal(a, b) and not torch.equal(a, c)
    finally:
        for e in envs:
            e.close()


def test_task_failure_closes_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[MujocoBackend] = []
    original = MujocoBackend.close

    def spy(self: MujocoBackend) -> None:
        closed.append(self)
        original(self)

    monkeypatch.setattr(MujocoBackend, "close", spy)
    cfg = _cfg("g1_motion_tracking", "task.motion=motions/g1/absent.npz")
    with pytest.raises(MotionClipError, match=r"absent\.npz"):
        make_env(cfg)
    assert len(closed) == 1


def test_mjwarp_device_conflict_is_rejected_before_building() -> None:
    cfg = _cfg("g1_walk_flat", "training.mjwarp_device=cuda", sim="mjwarp")
    with pytest.raises(ValueError, match=r"conflicts with training\.mjwarp_device"):
        make_env(cfg, device=torch.device("cpu"))
