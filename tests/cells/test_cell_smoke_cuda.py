"""CUDA cell smoke tests: each MJWarp cell's whole runtime path on the GPU, bound to its matrix cell.

For every (algo, task) on the MJWarp backend: compose the owner configuration, build the real env on the
CUDA device (MJWarp physics + task), act with the real actor, feed the learner on the same device and
run a real gradient update. Skipped without a CUDA device (MJWarp's production lane is CUDA only; the
CPU device is a diagnostic lane that never counts).
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.cuda

# Literal markers: `matrix check` reads them from the source without running pytest.
CELLS = [
    pytest.param("sac", "g1_walk_flat", marks=pytest.mark.cell("sac", "g1_walk_flat", "mjwarp", kind="smoke"), id="sac-g1_walk_flat"),
    pytest.param("sac", "g1_motion_tracking", marks=pytest.mark.cell("sac", "g1_motion_tracking", "mjwarp", kind="smoke"), id="sac-g1_motion_tracking"),
    pytest.param("flashsac", "g1_walk_flat", marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mjwarp", kind="smoke"), id="flashsac-g1_walk_flat"),
    pytest.param("flashsac", "g1_motion_tracking", marks=pytest.mark.cell("flashsac", "g1_motion_tracking", "mjwarp", kind="smoke"), id="flashsac-g1_motion_tracking"),
]  # fmt: skip


@pytest.mark.parametrize(("algo", "task"), CELLS)
def test_cuda_cell_collects_and_learns(algo: str, task: str) -> None:
    import torch

    from soakbench.runtime.config import compose
    from soakbench.runtime.env import make_env
    from soakbench.runtime.learners import build_learner

    torch.manual_seed(0)
    num_envs, steps = 64, 4
    cfg = compose(
        algo,
        task,
        "mjwarp",
        [f"algo.num_envs={num_envs}", "algo.batch_size=64", f"algo.learning_starts={num_envs * steps}"],
    )
    cuda = torch.device("cuda")
    env = make_env(cfg, device=cuda, seed=0)
    try:
        assert env.device.type == "cuda"
        learner = build_learner(cfg.algo, env.obs_dim, env.action_dim, cuda)
        obs = env.reset()
        for _ in range(steps):
            with torch.no_grad():
                action = learner.actor.act(obs, deterministic=False)
            assert action.shape == (num_envs, env.action_dim) and float(action.abs().max()) <= 1.0
            out = env.step(action)
            assert bool(torch.isfinite(out.reward).all()) and bool(torch.isfinite(out.obs).all())
            learner.add_transitions(obs, action, out.reward, out.next_obs, out.terminated)
            obs = out.obs
        assert learner.ready()
        metrics = learner.update()
        assert metrics and all(math.isfinite(v) for v in metrics.values()), metrics
    finally:
        env.close()
