"""Model facts the tasks need (joint ranges, default pose, sensor slices), as tensors on one device.

Built once from the compiled ``mujoco.MjModel``; the hot path only touches these tensors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    import mujoco

FREE_JOINT = 0  # mjJNT_FREE
HINGE_JOINT = 3  # mjJNT_HINGE
STAND_KEY = "stand"


class TaskModelError(ValueError):
    """The model does not have what a task needs (named in the message)."""


@dataclass(frozen=True)
class ModelInfo:
    """Static per-model tensors on ``device``. J = hinge joints (= actuators), in qpos order.

    default_qpos:      [nq] the ``stand`` keyframe (root pose + joint angles)
    default_joint_pos: [J] rad, keyframe joint angles (the action origin)
    joint_lower/upper: [J] rad, joint range
    ctrl_lower/upper:  [J] rad, actuator target range
    soft_lower/upper:  [J] rad, 90 % of the joint range about its middle (limit penalty onset)
    sensor_slices:     sensor name -> (start, stop) columns of ``sensordata``
    """

    nq: int
    nv: int
    nu: int
    control_dt: float
    joint_names: tuple[str, ...]
    default_qpos: torch.Tensor
    default_joint_pos: torch.Tensor
    joint_lower: torch.Tensor
    joint_upper: torch.Tensor
    ctrl_lower: torch.Tensor
    ctrl_upper: torch.Tensor
    soft_lower: torch.Tensor
    soft_upper: torch.Tensor
    sensor_slices: dict[str, tuple[int, int]]

    def sensor(self, sensordata: torch.Tensor, name: str) -> torch.Tensor:
        """Columns of sensor ``name`` in ``sensordata`` [N, S] -> [N, dim]."""
        start, stop = self.sensor_slices[name]
        return sensordata[:, start:stop]

    def require_sensors(self, names: list[str]) -> None:
        """Raise :class:`TaskModelError` naming the first sensor the model lacks."""
        missing = [n for n in names if n not in self.sensor_slices]
        if missing:
            raise TaskModelError(f"model lacks sensor(s) {missing[:6]} required by the task")


def model_info(model: mujoco.MjModel, decimation: int, device: torch.device) -> ModelInfo:
    """Extract :class:`ModelInfo` from a G1-layout model (free root, then hinges, one actuator each)."""
    if model.njnt < 2 or int(model.jnt_type[0]) != FREE_JOINT:
        raise TaskModelError("model must start with a free joint (floating base)")
    hinge_ids = list(range(1, model.njnt))
    if any(int(model.jnt_type[j]) != HINGE_JOINT for j in hinge_ids):
        raise TaskModelError("every joint after the floating base must be a hinge")
    if model.nu != len(hinge_ids):
        raise TaskModelError(f"model has {model.nu} actuators for {len(hinge_ids)} hinges; need one each")
    for a in range(model.nu):
        if int(model.actuator_trnid[a, 0]) != hinge_ids[a]:
            raise TaskModelError(f"actuator {a} must drive hinge {model.joint(hinge_ids[a]).name!r}")
    try:
        key = model.key(STAND_KEY).id
    except KeyError:
        raise TaskModelError(f"model lacks the {STAND_KEY!r} keyframe (default pose)") from None

    def t(x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, dtype=np.float32), device=device)

    qadr = np.array([model.jnt_qposadr[j] for j in hinge_ids])
    lower, upper = model.jnt_range[hinge_ids].T
    mid, half = 0.5 * (lower + upper), 0.5 * (upper - lower)
    slices = {
        model.sensor(s).name: (int(model.sensor_adr[s]), int(model.sensor_adr[s] + model.sensor_dim[s]))
        for s in range(model.nsensor)
    }
    return ModelInfo(
        nq=int(model.nq),
        nv=int(model.nv),
        nu=int(model.nu),
        control_dt=float(model.opt.timestep) * decimation,
        joint_names=tuple(model.joint(j).name for j in hinge_ids),
        default_qpos=t(model.key_qpos[key]),
        default_joint_pos=t(model.key_qpos[key][qadr]),
        joint_lower=t(lower),
        joint_upper=t(upper),
        ctrl_lower=t(model.actuator_ctrlrange[:, 0]),
        ctrl_upper=t(model.actuator_ctrlrange[:, 1]),
        soft_lower=t(mid - 0.9 * half),
        soft_upper=t(mid + 0.9 * half),
        sensor_slices=slices,
    )
