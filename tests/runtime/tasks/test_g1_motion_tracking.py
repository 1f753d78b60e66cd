"""G1MotionTracking on the real MuJoCo backend: reference resets, rewards, terminations, clip end."""

from __future__ import annotations

import pytest
import torch

from soakbench.runtime.assets import MotionClipError
from soakbench.runtime.tasks._math import quat_angle_error
from soakbench.runtime.tasks.g1_motion_tracking import G1MotionTracking, relative_reference

from .conftest import EnvFactory


def _tracking(env_factory: EnvFactory, n: int, *overrides: str, seed: int = 0) -> G1MotionTracking:
    env = env_factory("g1_motion_tracking", n, *overrides, seed=seed)
    assert isinstance(env, G1MotionTracking)
    return env


def _feedforward(env: G1MotionTracking) -> torch.Tensor:
    """Actions whose joint targets are the next reference frame's joint positions."""
    frame = (env._frame(None) + 1).clamp(max=env.num_frames - 1)
    joint_pos, _, _ = env.reference(frame)
    return ((joint_pos - env.info.default_joint_pos) / env.action_scale).clamp(-1.0, 1.0)


def test_reset_writes_reference_state_at_random_phases(env_factory: EnvFactory) -> None:
    env = _tracking(env_factory, 8)
    obs = env.reset()
    assert obs.shape == (8, 160) and env.obs_dim == 160 and torch.isfinite(obs).all()
    assert env.start_frame.unique().numel() > 1  # type: ignore[no-untyped-call]  # torch leaves Tensor.unique unannotated
    sensors = env.backend.public_state().sensordata
    body_pos, body_quat, lin, ang = env._bodies(sensors)
    _, _, ref = env.reference(env.start_frame)
    torch.testing.assert_close(body_pos, ref.pos, atol=1e-4, rtol=0)
    assert quat_angle_error(body_quat, ref.quat).max() < 2e-3
    torch.testing.assert_close(lin, ref.lin_vel, atol=1e-3, rtol=0)
    torch.testing.assert_close(ang, ref.ang_vel, atol=1e-3, rtol=0)
    # Anchor error observation is ~zero right after a reference reset.
    assert obs[:, 58:61].abs().max() < 1e-3


def test_relative_reference_aligns_anchor_xy_and_heading() -> None:
    ref_anchor_pos = torch.tensor([[1.0, 2.0, 0.9]])
    ref_anchor_quat = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    robot_anchor_pos = torch.tensor([[0.0, 0.0, 0.5]])
    robot_anchor_quat = torch.tensor([[0.7071068, 0.0, 0.0, 0.7071068]])  # +90 deg heading
    ref_bodies = torch.tensor([[[1.0, 2.0, 0.9], [1.5, 2.0, 0.4]]])
    quats = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]])
    pos, quat = relative_reference(
        ref_bodies, quats, ref_anchor_pos, ref_anchor_quat, robot_anchor_pos, robot_anchor_quat
    )
    torch.testing.assert_close(pos[0, 0], torch.tensor([0.0, 0.0, 0.9]))  # robot xy, reference height
    torch.testing.assert_close(pos[0, 1], torch.tensor([0.0, 0.5, 0.4]), atol=1e-6, rtol=0)  # rotated +90
    torch.testing.assert_close(quat[0, 1], robot_anchor_quat[0])


def test_feedforward_reference_tracks_and_random_actions_score_lower(env_factory: EnvFactory) -> None:
    env = _tracking(env_factory, 4, "task.episode_length_s=100")
    env.reset()
    tracked, terminations = [], 0
    for _ in range(40):
        out = env.step(_feedforward(env))
        tracked.append(out.reward)
        terminations += int(out.terminated.sum())
    assert terminations == 0
    assert env.last_terms["body_pos"].min() > 0.8 and env.last_terms["anchor_ori"].min() > 0.8
    env2 = _tracking(env_factory, 4, seed=0)
    env2.reset()
    gen = torch.Generator().manual_seed(0)
    noisy = [env2.step(torch.rand(4, 29, generator=gen) * 2 - 1).reward for _ in range(10)]
    assert torch.stack(tracked[:10]).mean() > torch.stack(noisy).mean()


def test_large_anchor_deviation_terminates(env_factory: EnvFactory) -> None:
    env = _tracking(env_factory, 2, "task.episode_length_s=100")
    env.reset()
    qpos, qvel = env.reference_state(env.start_frame)
    qpos[1, 2] -= 0.4  # drop row 1's root (and anchor) 0.4 m below the reference
    env.backend.reset_rows(torch.tensor([1]), qpos[1:], qvel[1:])
    out = env.step(_feedforward(env))
    assert out.terminated.tolist() == [False, True]
    assert not out.truncated.any()


def test_clip_end_is_truncated(env_factory: EnvFactory) -> None:
    env = _tracking(env_factory, 2, "task.episode_length_s=100")
    env.reset()
    rows = torch.arange(2)
    env.start_frame.fill_(env.num_frames - 3)
    env.backend.reset_rows(rows, *env.reference_state(env.start_frame))
    truncated = []
    for _ in range(2):
        out = env.step(_feedforward(env))
        assert not out.terminated.any()
        truncated.append(out.truncated.tolist())
    assert truncated == [[False, False], [True, True]]
    assert out.episode_lengths.tolist() == [2, 2]


def test_same_seed_same_trajectory(env_factory: EnvFactory) -> None:
    def rollout(seed: int) -> list[torch.Tensor]:
        env = _tracking(env_factory, 4, seed=seed)
        gen = torch.Generator().manual_seed(3)
        obs = [env.reset().clone()]
        for _ in range(25):
            obs.append(env.step(torch.rand(4, 29, generator=gen) * 0.4 - 0.2).obs.clone())
        return obs

    a, b, c = rollout(5), rollout(5), rollout(6)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_missing_clip_fails_with_regenerate_hint(env_factory: EnvFactory) -> None:
    with pytest.raises(MotionClipError, match="generate_motion"):
        env_factory("g1_motion_tracking", 2, "task.motion=motions/g1/absent.npz")


@pytest.mark.slow
def test_random_policy_1000_steps_64_envs_is_finite(env_factory: EnvFactory) -> None:
    env = _tracking(env_factory, 64, "training.physics_threads=2")
    env.reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(1000):
        out = env.step(torch.rand(64, 29, generator=gen) * 2 - 1)
        assert torch.isfinite(out.obs).all() and torch.isfinite(out.next_obs).all()
        assert torch.isfinite(out.reward).all()
