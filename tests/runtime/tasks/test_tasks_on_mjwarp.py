"""Both tasks on the MJWarp backend: the CPU diagnostic lane agrees with MuJoCo after a reset, and
on CUDA (production lane) a random policy stays finite."""

from __future__ import annotations

import pytest
import torch

from soakbench.runtime.config import compose
from soakbench.runtime.env import make_env
from soakbench.runtime.tasks.base import TaskEnv

TASKS = ("g1_walk_flat", "g1_motion_tracking")


def _env(task: str, sim: str, n: int, *overrides: str) -> TaskEnv:
    cfg = compose("sac", task, sim, [f"algo.num_envs={n}", *overrides])
    return make_env(cfg, seed=3)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_reset_observations_match_mujoco(task: str) -> None:
    pytest.importorskip("mujoco_warp")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu = _env(task, "mujoco", 4, "training.physics_threads=1")
    warp = _env(task, "mjwarp", 4, "training.mjwarp_device=cpu")
    try:
        # Same seed -> same sampled reset states; both backends run forward kinematics on them.
        torch.testing.assert_close(warp.reset(), cpu.reset(), atol=1e-4, rtol=1e-4)
        out_w = warp.step(torch.zeros(4, 29))
        out_c = cpu.step(torch.zeros(4, 29))
        assert torch.isfinite(out_w.obs).all() and torch.isfinite(out_w.reward).all()
        assert out_w.terminated.tolist() == out_c.terminated.tolist()
    finally:
        warp.close()
        cpu.close()
        torch.set_num_threads(before)


@pytest.mark.cuda
@pytest.mark.parametrize("task", TASKS)
def test_random_policy_on_cuda_is_finite(task: str) -> None:
    env = _env(task, "mjwarp", 64)
    try:
        assert env.device.type == "cuda"
        env.reset()
        gen = torch.Generator(device=env.device).manual_seed(0)
        for _ in range(200):
            out = env.step(torch.rand(64, 29, generator=gen, device=env.device) * 2 - 1)
        assert torch.isfinite(out.obs).all() and torch.isfinite(out.reward).all()
    finally:
        env.close()
