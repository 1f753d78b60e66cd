"""Cell smoke tests: each CPU cell's whole runtime path, bound to its matrix cell.

For every (algo, task) on the MuJoCo CPU backend: compose the owner configuration, build the real
env (MuJoCo host bridge + task), act with the real actor, feed the learner and run real gradient
updates. The `cell` marker makes a pass here count as Tested evidence for that cell once the CPU lane's
JUnit XML is ingested (`pytest -p matrix.pytest_cell ...`).

The cells' bound tests live in tests/cells/, not tests/matrix/: every conftest above a bound test is an
input of the cell's Tested evidence, and tests/matrix/conftest.py imports the matrix's own code.
"""

from __future__ import annotations

import math

import pytest

# Literal markers: `matrix check` reads them from the source without running pytest.
CELLS = [
    pytest.param("sac", "g1_walk_flat", marks=pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="smoke"), id="sac-g1_walk_flat"),
    pytest.param("sac", "g1_motion_tracking", marks=pytest.mark.cell("sac", "g1_motion_tracking", "mujoco", kind="smoke"), id="sac-g1_motion_tracking"),
    pytest.param("flashsac", "g1_walk_flat", marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="smoke"), id="flashsac-g1_walk_flat"),
    pytest.param("flashsac", "g1_motion_tracking", marks=pytest.mark.cell("flashsac", "g1_motion_tracking", "mujoco", kind="smoke"), id="flashsac-g1_motion_tracking"),
]  # fmt: skip


@pytest.mark.parametrize(("algo", "task"), CELLS)
def test_cpu_cell_collects_and_learns(algo: str, task: str) -> None:
    torch = pytest.importorskip("torch")
    from soakbench.runtime.config import compose
    from soakbench.runtime.env import make_env
    from soakbench.runtime.learners import build_learner

    torch.manual_seed(0)
    num_envs, steps = 4, 6
    cfg = compose(
        algo,
        task,
        "mujoco",
        [
            f"algo.num_envs={num_envs}",
            "algo.batch_size=8",
            f"algo.learning_starts={num_envs * steps}",
            "training.physics_threads=1",
        ],
    )
    cpu = torch.device("cpu")
    env = make_env(cfg, device=cpu, seed=0)
    try:
        learner = build_learner(cfg.algo, env.obs_dim, env.action_dim, cpu)
        obs = env.reset()
        assert obs.shape == (num_envs, env.obs_dim)
        for _ in range(steps):
            with torch.no_grad():
                action = learner.actor.act(obs, deterministic=False)
            assert action.shape == (num_envs, env.action_dim) and float(action.abs().max()) <= 1.0
            out = env.step(action)
            assert out.reward.shape == (num_envs,) and bool(torch.isfinite(out.reward).all())
            learner.add_transitions(obs, action, out.reward, out.next_obs, out.terminated)
            obs = out.obs
        assert learner.ready()
        metrics = learner.update()
        assert metrics and all(math.isfinite(v) for v in metrics.values()), metrics
    finally:
        env.close()
