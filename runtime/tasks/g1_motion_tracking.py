"""G1MotionTracking: track a reference clip, BeyondMimic-style (batched torch on the backend's device).

The anchor is ``torso_link``. Reference body poses are re-expressed relative to the robot's anchor
(its xy position and heading, the reference height), so tracking is judged on the pose, not on where
the robot drifted to.

Observation (O = 160): reference joint position [29] and velocity ×0.05 [29]; the reference anchor's
position [3] and orientation (two rotation-matrix columns) [6] in the robot anchor frame; base linear
[3] and angular ×0.25 [3] velocity in the base frame; joint position minus default [29]; joint
velocity ×0.05 [29]; last action [29].

Reward: :data:`REWARD_WEIGHTS` over :func:`tracking_terms` (exp kernels on anchor and body errors) and
the shared action-rate and joint-limit penalties of :func:`runtime.tasks.base.action_terms`.
Termination: anchor height or tilt, or an end effector's height, deviating beyond :data:`TERMINATION`
limits, or the base below ``task.min_base_height``.
Truncation: the clip runs out or ``task.episode_length_s`` is reached. Reset: a uniformly random clip
frame whose reference state (root pose/velocity, joints) is written into the selected rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from soakbench.runtime.assets import load_motion
from soakbench.runtime.tasks._math import (
    projected_gravity,
    quat_angle_error,
    quat_conjugate,
    quat_mul,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_tan_norm,
    yaw_quat,
)
from soakbench.runtime.tasks._model import TaskModelError
from soakbench.runtime.tasks.base import TaskConfigError, TaskEnv, action_terms, cfg_float

if TYPE_CHECKING:
    import mujoco

    from soakbench.runtime.backends.base import PublicState, SimBackend

ANCHOR_BODY = "torso_link"
ROOT_BODY = "pelvis"
END_EFFECTORS = (
    "left_ankle_roll_link",
    "right_ankle_roll_link",
    "left_wrist_yaw_link",
    "right_wrist_yaw_link",
)
REWARD_WEIGHTS: dict[str, float] = {
    "anchor_pos": 0.5,  # exp(-|p_ref - p|^2 / 0.3^2), anchor, world
    "anchor_ori": 0.5,  # exp(-angle^2 / 0.4^2)
    "body_pos": 1.0,  # exp(-mean_b |p_rel - p|^2 / 0.3^2)
    "body_ori": 1.0,  # exp(-mean_b angle^2 / 0.4^2)
    "body_lin_vel": 1.0,  # exp(-mean_b |v_ref - v|^2 / 1.0^2)
    "body_ang_vel": 1.0,  # exp(-mean_b |w_ref - w|^2 / 3.14^2)
    "action_rate": -0.1,  # |a_t - a_{t-1}|^2
    "joint_limits": -10.0,  # rad beyond the soft (90 %) joint range, summed
}
TERMINATION = {"anchor_height_m": 0.25, "anchor_gravity_z": 0.8, "end_effector_height_m": 0.25}
ANG_VEL_SCALE = 0.25
JOINT_VEL_SCALE = 0.05


class Bodies(NamedTuple):
    """Kinematics of the tracked bodies, world frame: pos [n, B, 3], quat [n, B, 4], linear and angular
    velocity [n, B, 3]."""

    pos: torch.Tensor
    quat: torch.Tensor
    lin_vel: torch.Tensor
    ang_vel: torch.Tensor


def relative_reference(
    ref_body_pos: torch.Tensor,
    ref_body_quat: torch.Tensor,
    ref_anchor_pos: torch.Tensor,
    ref_anchor_quat: torch.Tensor,
    robot_anchor_pos: torch.Tensor,
    robot_anchor_quat: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference bodies moved onto the robot anchor's xy and heading (reference height kept).

    ref_body_pos [N, B, 3], ref_body_quat [N, B, 4], anchors [N, 3] / [N, 4] -> ([N, B, 3], [N, B, 4])."""
    delta = yaw_quat(quat_mul(robot_anchor_quat, quat_conjugate(ref_anchor_quat)))  # [N, 4]
    origin = torch.cat([robot_anchor_pos[:, :2], ref_anchor_pos[:, 2:3]], dim=-1)
    b = ref_body_pos.shape[1]
    delta_b = delta.unsqueeze(1).expand(-1, b, -1)
    pos = origin.unsqueeze(1) + quat_rotate(delta_b, ref_body_pos - ref_anchor_pos.unsqueeze(1))
    return pos, quat_mul(delta_b, ref_body_quat)


def tracking_terms(
    *,
    ref_anchor_pos: torch.Tensor,
    ref_anchor_quat: torch.Tensor,
    anchor_pos: torch.Tensor,
    anchor_quat: torch.Tensor,
    reference: Bodies,
    robot: Bodies,
) -> dict[str, torch.Tensor]:
    """Unweighted anchor and body tracking terms, each [N] float32 (pure). Anchors [N, 3|4];
    ``reference`` holds the reference bodies moved by :func:`relative_reference` (velocities as in the
    clip), ``robot`` the robot's."""
    return {
        "anchor_pos": torch.exp(-(ref_anchor_pos - anchor_pos).square().sum(-1) / 0.3**2),
        "anchor_ori": torch.exp(-quat_angle_error(ref_anchor_quat, anchor_quat).square() / 0.4**2),
        "body_pos": torch.exp(-(reference.pos - robot.pos).square().sum(-1).mean(-1) / 0.3**2),
        "body_ori": torch.exp(-quat_angle_error(reference.quat, robot.quat).square().mean(-1) / 0.4**2),
        "body_lin_vel": torch.exp(-(reference.lin_vel - robot.lin_vel).square().sum(-1).mean(-1) / 1.0**2),
        "body_ang_vel": torch.exp(-(reference.ang_vel - robot.ang_vel).square().sum(-1).mean(-1) / 3.14**2),
    }


def deviation_terminated(
    *,
    ref_anchor_pos: torch.Tensor,
    ref_anchor_quat: torch.Tensor,
    anchor_pos: torch.Tensor,
    anchor_quat: torch.Tensor,
    ref_end_effector_pos_rel: torch.Tensor,
    end_effector_pos: torch.Tensor,
) -> torch.Tensor:
    """[N] bool: anchor height/tilt or any end-effector height beyond :data:`TERMINATION` (pure)."""
    g_ref = projected_gravity(ref_anchor_quat)[:, 2]
    g_robot = projected_gravity(anchor_quat)[:, 2]
    anchor_height = (ref_anchor_pos[:, 2] - anchor_pos[:, 2]).abs() > TERMINATION["anchor_height_m"]
    anchor_tilt = (g_ref - g_robot).abs() > TERMINATION["anchor_gravity_z"]
    ee = (ref_end_effector_pos_rel[..., 2] - end_effector_pos[..., 2]).abs() > TERMINATION[
        "end_effector_height_m"
    ]
    return anchor_height | anchor_tilt | ee.any(-1)


class G1MotionTracking(TaskEnv):
    """Reference-motion tracking for the G1; see the module docstring."""

    semantic_name = "G1MotionTracking"
    reward_weights = REWARD_WEIGHTS

    def __init__(
        self, task_cfg: Mapping[str, Any], model: mujoco.MjModel, backend: SimBackend, *, seed: int
    ) -> None:
        super().__init__(task_cfg, model, backend, seed=seed)
        motion = task_cfg.get("motion")
        if not isinstance(motion, str) or not motion:
            raise TaskConfigError(
                f"task.motion must name a clip under runtime/assets (e.g. motions/g1/...), got {motion!r}"
            )
        self.min_base_height = cfg_float(task_cfg, "min_base_height", low=0.0, high=2.0)
        clip = load_motion(motion)
        if clip.joint_names != self.info.joint_names:
            raise TaskModelError(
                f"task.motion={motion!r}: clip joints {clip.joint_names[:3]}... differ from the model's"
            )
        for name in (ROOT_BODY, ANCHOR_BODY, *END_EFFECTORS):
            clip.body_index(name)
        if clip.body_names[0] != ROOT_BODY:
            raise TaskModelError(f"task.motion={motion!r}: body_names[0] must be the root {ROOT_BODY!r}")
        self.info.require_sensors(
            [f"{b}_{s}" for b in clip.body_names for s in ("pos", "quat", "linvel", "angvel")]
        )
        dev = self.device
        self.clip_fps = clip.fps
        self.num_frames = clip.num_frames
        # The whole clip as one table [F, 2J + 13B]: joint pos | joint vel | per body pos 3|quat 4|linvel 3|
        # angvel 3 (the layout of the robot's gathered sensors), so a step reads its reference in one gather.
        frames = clip.num_frames
        self.num_bodies = len(clip.body_names)
        per_body = (clip.body_pos_w, clip.body_quat_w, clip.body_lin_vel_w, clip.body_ang_vel_w)
        bodies = torch.cat([torch.as_tensor(a, device=dev) for a in per_body], dim=-1)
        self.reference_table = torch.cat(
            [
                torch.as_tensor(clip.joint_pos, device=dev),
                torch.as_tensor(clip.joint_vel, device=dev),
                bodies.reshape(frames, -1),
            ],
            dim=-1,
        ).contiguous()
        self.anchor = clip.body_index(ANCHOR_BODY)
        self.end_effectors = torch.tensor([clip.body_index(b) for b in END_EFFECTORS], device=dev)
        self.frames_per_step = self.info.control_dt * clip.fps

        # One gather per step: sensordata columns of every tracked body as [pos 3|quat 4|linvel 3|angvel 3].
        cols: list[int] = []
        for body in clip.body_names:
            for suffix in ("pos", "quat", "linvel", "angvel"):
                start, stop = self.info.sensor_slices[f"{body}_{suffix}"]
                cols.extend(range(start, stop))
        self.body_cols = torch.tensor(cols, dtype=torch.int64, device=dev)
        self.start_frame = torch.zeros(self.num_envs, dtype=torch.int64, device=dev)
        self.obs_dim = 2 * self.action_dim + 3 + 6 + 3 + 3 + 3 * self.action_dim
        self.last_terms: dict[str, torch.Tensor] = {}

    # -- helpers ----------------------------------------------------------------------------------
    def _frame(self, rows: torch.Tensor | None) -> torch.Tensor:
        """Clip frame index [N] or [k] for the current episode step (clamped to the last frame)."""
        start = self.start_frame if rows is None else self.start_frame[rows]
        step = self.episode_step if rows is None else self.episode_step[rows]
        return (start + torch.round(step.float() * self.frames_per_step).long()).clamp(
            max=self.num_frames - 1
        )

    def _bodies(self, sensordata: torch.Tensor) -> Bodies:
        """Robot tracked bodies from ``sensordata`` [n, S]."""
        return self._split_bodies(torch.index_select(sensordata, 1, self.body_cols))

    def _split_bodies(self, packed: torch.Tensor) -> Bodies:
        """Views of ``packed`` [n, 13B] (per body pos|quat|linvel|angvel) as :class:`Bodies`."""
        per_body = packed.view(-1, self.num_bodies, 13)
        return Bodies(per_body[..., 0:3], per_body[..., 3:7], per_body[..., 7:10], per_body[..., 10:13])

    def _split_reference(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Bodies]:
        """Views of reference table rows [n, 2J + 13B]: joint pos [n, J], joint vel [n, J], bodies."""
        joints = self.action_dim
        return rows[:, :joints], rows[:, joints : 2 * joints], self._split_bodies(rows[:, 2 * joints :])

    def reference(self, frame: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Bodies]:
        """The reference at clip frames ``frame`` [n] (int64), gathered in one op."""
        return self._split_reference(torch.index_select(self.reference_table, 0, frame))

    # -- task hooks -------------------------------------------------------------------------------
    def reference_state(self, frame: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Physics state of clip frames ``frame`` [k] (int64): ``qpos`` [k, nq], ``qvel`` [k, nv]."""
        joint_pos, joint_vel, ref = self.reference(frame)
        root_quat = ref.quat[:, 0]
        qpos = torch.cat([ref.pos[:, 0], root_quat, joint_pos], dim=-1)
        # Free joint: linear velocity in world, angular velocity in the body frame.
        qvel = torch.cat(
            [ref.lin_vel[:, 0], quat_rotate_inverse(root_quat, ref.ang_vel[:, 0]), joint_vel], dim=-1
        )
        return qpos, qvel

    def _sample_reset_state(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Uniform start phase; the last frame is excluded so every episode has at least one step.
        frame = torch.randint(
            0, self.num_frames - 1, (rows.shape[0],), generator=self.generator, device=self.device
        )
        self.start_frame[rows] = frame
        return self.reference_state(frame)

    def _observe(self, state: PublicState, rows: torch.Tensor | None) -> torch.Tensor:
        if rows is None:
            qpos, qvel, sensors, last_action = state.qpos, state.qvel, state.sensordata, self.last_action
        else:
            qpos, qvel, sensors = state.qpos[rows], state.qvel[rows], state.sensordata[rows]
            last_action = self.last_action[rows]
        ref_joint_pos, ref_joint_vel, ref = self.reference(self._frame(rows))
        body_pos, body_quat, _, _ = self._bodies(sensors)
        anchor_pos, anchor_quat = body_pos[:, self.anchor], body_quat[:, self.anchor]
        ref_anchor_pos, ref_anchor_quat = ref.pos[:, self.anchor], ref.quat[:, self.anchor]
        root_quat = qpos[:, 3:7]
        return torch.cat(
            [
                ref_joint_pos,
                ref_joint_vel * JOINT_VEL_SCALE,
                quat_rotate_inverse(anchor_quat, ref_anchor_pos - anchor_pos),
                quat_to_tan_norm(quat_mul(quat_conjugate(anchor_quat), ref_anchor_quat)),
                quat_rotate_inverse(root_quat, qvel[:, 0:3]),
                qvel[:, 3:6] * ANG_VEL_SCALE,
                qpos[:, 7:] - self.info.default_joint_pos,
                qvel[:, 6:] * JOINT_VEL_SCALE,
                last_action,
            ],
            dim=-1,
        )

    def _evaluate(
        self, state: PublicState, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        frame = self._frame(None)
        robot = self._bodies(state.sensordata)
        _, _, ref = self.reference(frame)
        ref_pos, ref_quat = ref.pos, ref.quat
        anchor_pos, anchor_quat = robot.pos[:, self.anchor], robot.quat[:, self.anchor]
        ref_anchor_pos, ref_anchor_quat = ref_pos[:, self.anchor], ref_quat[:, self.anchor]
        ref_pos_rel, ref_quat_rel = relative_reference(
            ref_pos, ref_quat, ref_anchor_pos, ref_anchor_quat, anchor_pos, anchor_quat
        )
        reference = Bodies(ref_pos_rel, ref_quat_rel, ref.lin_vel, ref.ang_vel)
        terms = {
            **tracking_terms(
                ref_anchor_pos=ref_anchor_pos,
                ref_anchor_quat=ref_anchor_quat,
                anchor_pos=anchor_pos,
                anchor_quat=anchor_quat,
                reference=reference,
                robot=robot,
            ),
            **action_terms(
                action, self.last_action, state.qpos[:, 7:], self.info.soft_lower, self.info.soft_upper
            ),
        }
        self.last_terms = terms
        reward = self._weighted_reward(terms)
        terminated = deviation_terminated(
            ref_anchor_pos=ref_anchor_pos,
            ref_anchor_quat=ref_anchor_quat,
            anchor_pos=anchor_pos,
            anchor_quat=anchor_quat,
            ref_end_effector_pos_rel=ref_pos_rel[:, self.end_effectors],
            end_effector_pos=robot.pos[:, self.end_effectors],
        ) | (state.qpos[:, 2] < self.min_base_height)
        time_up = frame >= self.num_frames - 1
        return reward, terminated, time_up
