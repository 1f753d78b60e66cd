"""G1WalkFlat on the real MuJoCo backend: rewards, terminations, time-outs, resets, determinism."""

from __future__ import annotations

import pytest
import torch

from soakbench.runtime.assets import load_model
from soakbench.runtime.tasks._math import quat_from_yaw
from soakbench.runtime.tasks.base import TaskConfigError
from soakbench.runtime.tasks.g1_walk_flat import G1WalkFlat, fallen, tracking_terms
from soakbench.runtime.timing import PHASES, PhaseTimer

from .conftest import EnvFactory


def test_dimensions_and_first_observation(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 4)
    assert isinstance(env, G1WalkFlat) and env.semantic_name == "G1WalkFlat"
    obs = env.reset()
    assert obs.shape == (4, env.obs_dim) and env.obs_dim == 96 and env.action_dim == 29
    assert torch.isfinite(obs).all()
    torch.testing.assert_close(obs[:, 3:6], torch.tensor([0.0, 0.0, -1.0]).expand(4, 3), atol=1e-5, rtol=0)
    lo, hi = -0.5, 1.0
    assert ((obs[:, 6] >= lo) & (obs[:, 6] <= hi)).all()  # v_x command within task.command_lin_vel_x


def test_upright_standing_outscores_fallen_pure() -> None:
    n = 2
    gravity = torch.tensor([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]])  # upright, lying on its back
    height = torch.tensor([0.77, 0.1])
    terms = tracking_terms(
        command=torch.zeros(n, 3),
        lin_vel_heading=torch.zeros(n, 3),
        ang_vel_z=torch.zeros(n),
        projected_gravity=gravity,
        base_height=height,
        stand_height=0.77,
    )
    assert terms["upright"][0] > 0.99 > 0.01 > terms["upright"][1]
    assert terms["base_height"][0] > terms["base_height"][1]
    assert fallen(height, gravity, 0.45).tolist() == [False, True]


def test_zero_action_stands_and_fallen_row_terminates(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 3)
    assert isinstance(env, G1WalkFlat)
    env.reset()
    # Row 2: lay the robot on its back near the floor (pitch -90 deg about y).
    info = env.info
    qpos = info.default_qpos.clone()
    qpos[2] = 0.15
    qpos[3:7] = torch.tensor([0.7071068, 0.0, -0.7071068, 0.0])
    env.backend.reset_rows(torch.tensor([2]), qpos[None], torch.zeros(1, info.nv))
    out = env.step(torch.zeros(3, 29))
    assert out.terminated.tolist() == [False, False, True]
    assert not out.truncated.any()
    assert out.episode_lengths.tolist() == [1]
    assert env.last_terms["upright"][0] > env.last_terms["upright"][2]
    assert out.reward[0] > out.reward[2]
    # The fallen row was auto-reset: obs differs from next_obs there only, and it stands again.
    assert torch.equal(out.obs[:2], out.next_obs[:2]) and not torch.equal(out.obs[2], out.next_obs[2])
    assert float(env.backend.public_state().qpos[2, 2]) > 0.7
    for _ in range(60):
        out = env.step(torch.zeros(3, 29))
        assert not out.terminated.any()


def test_time_out_is_truncated_not_terminated(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 2, "task.episode_length_s=0.2")  # 10 control steps at 50 Hz
    env.reset()
    for step in range(1, 11):
        out = env.step(torch.zeros(2, 29))
        assert not out.terminated.any()
        assert out.truncated.all() == (step == 10)
    assert out.episode_lengths.tolist() == [10, 10]
    assert out.episode_returns.shape == (2,) and (out.episode_returns > 0).all()
    assert (env.episode_step == 0).all()


def test_same_seed_same_trajectory(env_factory: EnvFactory) -> None:
    def rollout(seed: int) -> list[torch.Tensor]:
        env = env_factory("g1_walk_flat", 4, seed=seed)
        gen = torch.Generator().manual_seed(7)
        obs = [env.reset().clone()]
        for _ in range(30):
            out = env.step(torch.rand(4, 29, generator=gen) * 2 - 1)
            obs.append(out.obs.clone())
        return obs

    a, b, c = rollout(1), rollout(1), rollout(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_timer_phases_are_recorded(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 2)
    env.reset()
    timer = PhaseTimer(torch.device("cpu"))
    env.step(torch.zeros(2, 29), timer=timer)
    assert set(timer.samples_ms) == {"physics_exchange", "update_state", "reset_selection"}
    qpos = env.info.default_qpos.clone()
    qpos[2] = 0.1
    env.backend.reset_rows(torch.tensor([0]), qpos[None], torch.zeros(1, env.info.nv))
    env.step(torch.zeros(2, 29), timer=timer)
    assert set(timer.samples_ms) == set(PHASES)


def test_bad_actions_and_settings_fail_closed(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 2)
    env.reset()
    with pytest.raises(ValueError, match="actions must have shape"):
        env.step(torch.zeros(2, 28))
    with pytest.raises(ValueError, match="finite"):
        env.step(torch.full((2, 29), float("nan")))


def test_reset_yaw_is_random_and_pose_near_default(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 16)
    env.reset()
    qpos = env.backend.public_state().qpos
    assert (qpos[:, 7:] - env.info.default_joint_pos).abs().max() <= 0.05 + 1e-6
    assert float(qpos[:, 6].std()) > 0.1  # quaternion z varies with the sampled heading
    assert torch.allclose(quat_from_yaw(torch.zeros(1)), torch.tensor([[1.0, 0.0, 0.0, 0.0]]))


@pytest.mark.slow
def test_random_policy_1000_steps_64_envs_is_finite(env_factory: EnvFactory) -> None:
    env = env_factory("g1_walk_flat", 64, "training.physics_threads=2")
    obs = env.reset()
    gen = torch.Generator().manual_seed(0)
    finished = 0
    for _ in range(1000):
        out = env.step(torch.rand(64, 29, generator=gen) * 2 - 1)
        assert torch.isfinite(out.obs).all() and torch.isfinite(out.next_obs).all()
        assert torch.isfinite(out.reward).all()
        finished += out.episode_lengths.numel()
    assert finished > 0 and obs.shape == (64, 96)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("decimation", 2, "but the backend steps 4"),
        ("decimation", 4.5, "must be an integer"),
        ("action_scale", -1.0, r"task\.action_scale must lie in"),
        ("command_lin_vel_x", [1.0, -1.0], "low <= high"),
        ("min_base_height", "low", r"task\.min_base_height must be a number"),
    ],
)
def test_bad_task_settings_fail_closed(
    env_factory: EnvFactory, key: str, value: object, message: str
) -> None:
    env = env_factory("g1_walk_flat", 1)
    settings = {
        "decimation": 4,
        "action_scale": 0.25,
        "episode_length_s": 20.0,
        "min_base_height": 0.45,
        "command_lin_vel_x": [-0.5, 1.0],
        "command_lin_vel_y": [-0.3, 0.3],
        "command_ang_vel_z": [-0.5, 0.5],
    }
    settings[key] = value
    with pytest.raises(TaskConfigError, match=message):
        G1WalkFlat(settings, load_model("robots/g1/scene_flat.xml"), env.backend, seed=0)
