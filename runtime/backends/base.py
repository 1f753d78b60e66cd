"""The SimBackend contract: batched physics for ``num_envs`` worlds behind one tensor interface.

Tasks talk to physics only through this contract, so the same task code runs on the MuJoCo CPU
host bridge and on device-resident MuJoCo Warp. Backends never import a task; tasks never import a
backend module (they receive an instance).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, TypedDict

import torch

DataPlane = Literal["host_bridge", "device"]


class OptimizationDiagnostic(TypedDict):
    """State of one runtime optimization. ``disable_reason`` is non-empty iff ``enabled`` is false."""

    requested: bool
    enabled: bool
    disable_reason: str | None


@dataclass(frozen=True)
class PublicState:
    """Per-world state published after every control step, on the backend's tensor device.

    Shapes (N = num_envs):
        qpos:           [N, nq]  generalized positions (free-joint base first: xyz, wxyz quat)
        qvel:           [N, nv]  generalized velocities
        sensordata:     [N, nsensordata]  every MJCF sensor, addressed by ``model.sensor_adr``
        actuator_force: [N, nu]  actuator forces (N·m for the hinge actuators)

    The tensors are live views of the backend's buffers: they are valid until the next ``step`` or
    ``reset_rows`` and are overwritten in place, so a caller that keeps a value must ``clone()`` it.
    """

    qpos: torch.Tensor
    qvel: torch.Tensor
    sensordata: torch.Tensor
    actuator_force: torch.Tensor


class SimBackend(ABC):
    """Batched physics for ``num_envs`` independent worlds of one compiled MuJoCo model.

    A control step applies ``ctrl`` (actuator targets, shape [N, nu]) and advances ``decimation``
    physics substeps of ``model.opt.timestep`` seconds each.
    """

    backend_type: str
    data_plane: DataPlane

    def __init__(self, model: object, num_envs: int, device: torch.device, decimation: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if decimation < 1:
            raise ValueError(f"decimation must be >= 1, got {decimation}")
        self.num_envs = num_envs
        self.device = device
        self.decimation = decimation

    @abstractmethod
    def step(self, ctrl: torch.Tensor) -> PublicState:
        """Apply ``ctrl`` [N, nu] and run ``decimation`` substeps; return the new public state."""

    @abstractmethod
    def reset_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> PublicState:
        """Write ``qpos`` [k, nq] and ``qvel`` [k, nv] into worlds ``rows`` [k] (int64), zero their
        ctrl and warm-start state, recompute derived quantities (sensors) for those rows only, and
        return the full public state. Rows not listed must continue bit-identically."""

    @abstractmethod
    def public_state(self) -> PublicState:
        """The current public state without stepping."""

    @abstractmethod
    def get_public_state_widths(self) -> dict[str, int]:
        """Row widths of each ``PublicState`` field, e.g. ``{"qpos": 36, "qvel": 35, ...}``."""

    @abstractmethod
    def get_tensor_runtime_diagnostics(self) -> dict[str, OptimizationDiagnostic]:
        """Per optimization ``{requested, enabled, disable_reason}``; plain JSON, cold path."""

    def transfer_counters(self) -> dict[str, dict[str, int]]:
        """Host<->device copy counters by ``"<direction>/<phase>"`` -> ``{count, bytes}``.

        Device-resident backends make no per-step copies and return an empty mapping."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, default is nothing to release
        """Release worker threads and device resources; idempotent."""
