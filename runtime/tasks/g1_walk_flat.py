"""G1WalkFlat: velocity-command tracking on flat ground (batched torch on the backend's device).

Observation (O = 96): base angular velocity in the base frame ×0.25 [3], projected gravity [3],
command (v_x, v_y in the heading frame m/s, yaw rate rad/s) [3], joint position minus default [29],
joint velocity ×0.05 [29], last action [29].

Reward per control step: the weighted sum of :data:`REWARD_WEIGHTS` terms (:func:`tracking_terms`, the
shared :func:`runtime.tasks.base.action_terms` and the actuator torque).
Termination: base height below ``task.min_base_height`` or base tilted more than 60° (a fall).
Truncation: ``task.episode_length_s`` reached. Commands are resampled uniformly per episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from soakbench.runtime.tasks._math import (
    projected_gravity,
    quat_from_yaw,
    quat_mul,
    quat_rotate_inverse,
    yaw_quat,
)
from soakbench.runtime.tasks.base import TaskEnv, action_terms, cfg_float, cfg_range

if TYPE_CHECKING:
    import mujoco

    from soakbench.runtime.backends.base import PublicState, SimBackend

REWARD_WEIGHTS: dict[str, float] = {
    "track_lin_vel_xy": 1.0,  # exp(-|cmd_xy - v_xy|^2 / 0.25), heading frame
    "track_ang_vel_z": 0.5,  # exp(-(cmd_wz - w_z)^2 / 0.25)
    "upright": 0.5,  # exp(-|g_xy|^2 / 0.1), g = gravity direction in the base frame
    "base_height": 0.3,  # exp(-(z - z_stand)^2 / 0.01)
    "action_rate": -0.01,  # |a_t - a_{t-1}|^2
    "joint_limits": -2.0,  # rad beyond the soft (90 %) joint range, summed
    "torque": -2e-5,  # sum of squared actuator forces (N·m)^2
}
ANG_VEL_SCALE = 0.25
JOINT_VEL_SCALE = 0.05
MAX_TILT_COS = 0.5  # terminate when the base z axis is tilted more than 60° from vertical
RESET_JOINT_NOISE = 0.05  # rad, uniform, about the stand pose


def tracking_terms(
    *,
    command: torch.Tensor,
    lin_vel_heading: torch.Tensor,
    ang_vel_z: torch.Tensor,
    projected_gravity: torch.Tensor,
    base_height: torch.Tensor,
    stand_height: float,
) -> dict[str, torch.Tensor]:
    """Unweighted command-tracking and posture terms, each [N] float32 (pure).

    command [N, 3]; lin_vel_heading [N, 3] (m/s); ang_vel_z [N] (rad/s); projected_gravity [N, 3];
    base_height [N] (m).
    """
    lin_err = (command[:, :2] - lin_vel_heading[:, :2]).square().sum(-1)
    yaw_err = (command[:, 2] - ang_vel_z).square()
    return {
        "track_lin_vel_xy": torch.exp(-lin_err / 0.25),
        "track_ang_vel_z": torch.exp(-yaw_err / 0.25),
        "upright": torch.exp(-projected_gravity[:, :2].square().sum(-1) / 0.1),
        "base_height": torch.exp(-(base_height - stand_height).square() / 0.01),
    }


def fallen(
    base_height: torch.Tensor, projected_gravity: torch.Tensor, min_base_height: float
) -> torch.Tensor:
    """[N] bool: base below ``min_base_height`` (m) or tilted beyond 60° (pure)."""
    return (base_height < min_base_height) | (-projected_gravity[:, 2] < MAX_TILT_COS)


class G1WalkFlat(TaskEnv):
    """Velocity-command walking for the G1 on flat ground; see the module docstring."""

    semantic_name = "G1WalkFlat"
    reward_weights = REWARD_WEIGHTS

    def __init__(
        self, task_cfg: Mapping[str, Any], model: mujoco.MjModel, backend: SimBackend, *, seed: int
    ) -> None:
        super().__init__(task_cfg, model, backend, seed=seed)
        self.min_base_height = cfg_float(task_cfg, "min_base_height", low=0.0, high=2.0)
        self.command_ranges = [
            cfg_range(task_cfg, key)
            for key in ("command_lin_vel_x", "command_lin_vel_y", "command_ang_vel_z")
        ]
        self.stand_height = float(self.info.default_qpos[2])
        self.obs_dim = 9 + 3 * self.action_dim
        self.command = torch.zeros(self.num_envs, 3, device=self.device)
        self.last_terms: dict[str, torch.Tensor] = {}

    def _sample_reset_state(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = rows.shape[0]
        info = self.info
        self.command[rows] = torch.stack(
            [self._uniform((k,), lo, hi) for lo, hi in self.command_ranges], dim=-1
        )
        qpos = info.default_qpos.repeat(k, 1)
        yaw = self._uniform((k,), -torch.pi, torch.pi)
        qpos[:, 3:7] = quat_mul(quat_from_yaw(yaw), qpos[:, 3:7])
        noise = self._uniform((k, self.action_dim), -RESET_JOINT_NOISE, RESET_JOINT_NOISE)
        qpos[:, 7:] = torch.clamp(info.default_joint_pos + noise, info.joint_lower, info.joint_upper)
        qvel = torch.zeros(k, info.nv, device=self.device)
        return qpos, qvel

    def _observe(self, state: PublicState, rows: torch.Tensor | None) -> torch.Tensor:
        qpos, qvel = (state.qpos, state.qvel) if rows is None else (state.qpos[rows], state.qvel[rows])
        command = self.command if rows is None else self.command[rows]
        last_action = self.last_action if rows is None else self.last_action[rows]
        gravity = projected_gravity(qpos[:, 3:7])
        return torch.cat(
            [
                qvel[:, 3:6] * ANG_VEL_SCALE,  # free-joint angular velocity is in the base frame
                gravity,
                command,
                qpos[:, 7:] - self.info.default_joint_pos,
                qvel[:, 6:] * JOINT_VEL_SCALE,
                last_action,
            ],
            dim=-1,
        )

    def _evaluate(
        self, state: PublicState, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        qpos, qvel = state.qpos, state.qvel
        base_quat = qpos[:, 3:7]
        gravity = projected_gravity(base_quat)
        lin_vel_heading = quat_rotate_inverse(yaw_quat(base_quat), qvel[:, 0:3])  # free-joint v is world
        ang_vel_z = qvel[:, 5]  # base-frame yaw rate; equals world yaw rate when upright
        terms = {
            **tracking_terms(
                command=self.command,
                lin_vel_heading=lin_vel_heading,
                ang_vel_z=ang_vel_z,
                projected_gravity=gravity,
                base_height=qpos[:, 2],
                stand_height=self.stand_height,
            ),
            **action_terms(action, self.last_action, qpos[:, 7:], self.info.soft_lower, self.info.soft_upper),
            "torque": state.actuator_force.square().sum(-1),
        }
        self.last_terms = terms
        reward = self._weighted_reward(terms)
        terminated = fallen(qpos[:, 2], gravity, self.min_base_height)
        time_up = torch.zeros_like(terminated)
        return reward, terminated, time_up
