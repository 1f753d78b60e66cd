"""The SimBackend contract: batched physics for ``num_envs`` worlds behind one tensor interface.

Tasks talk to physics only through this contract, so the same task code runs on the MuJoCo CPU
host bridge and on device-resident MuJoCo Warp. Backends never import a task; tasks never import a
backend module (they receive an instance). The probe and the trainer's manifest read a backend only
through what is declared here; the plain-data shapes live in :mod:`runtime.backends.contract`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import torch

from soakbench.runtime.backends.contract import (
    BackendCapabilities,
    DataPlane,
    HostSteppingInfo,
    OptimizationDiagnostic,
    PhysicsWarnings,
    PlatformView,
    TransferCount,
    TransferDeclaration,
)


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
    physics substeps of ``model.opt.timestep`` seconds each. ``model`` is the compiled model every
    world steps (a physics reference built from it steps the same physics).
    """

    backend_type: str
    data_plane: DataPlane
    # Host<->device copies a control step may make; a device-resident backend declares none.
    TRANSFER_INVENTORY: ClassVar[tuple[TransferDeclaration, ...]] = ()

    def __init__(self, model: mujoco.MjModel, num_envs: int, device: torch.device, decimation: int) -> None:
        if not isinstance(model, mujoco.MjModel):
            raise TypeError(f"model must be a compiled mujoco.MjModel, got {type(model).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if decimation < 1:
            raise ValueError(f"decimation must be >= 1, got {decimation}")
        self.model = model
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
    def get_tensor_runtime_diagnostics(self) -> dict[str, OptimizationDiagnostic]:
        """Per optimization ``{requested, enabled, disable_reason}``; plain JSON, cold path."""

    @classmethod
    @abstractmethod
    def capabilities(cls, platform: PlatformView) -> BackendCapabilities:
        """What this backend offers on ``platform``, read from the stated facts alone (never the host)."""

    @classmethod
    def host_transfers_by_phase(cls) -> tuple[tuple[str, int], ...]:
        """The declared copies per control step summed by phase, in declaration order."""
        totals: dict[str, int] = {}
        for item in cls.TRANSFER_INVENTORY:
            totals[item.phase] = totals.get(item.phase, 0) + item.max_per_control_step
        return tuple(totals.items())

    @classmethod
    def transfer_inventory(cls) -> tuple[TransferDeclaration, ...]:
        """The declared copies (:attr:`TRANSFER_INVENTORY`): the limit the probe checks the counters against."""
        return cls.TRANSFER_INVENTORY

    def transfer_counters(self) -> dict[str, TransferCount]:
        """Host<->device copies made so far, by ``"<direction>/<phase>"``.

        A backend that makes no counted copies (device-resident) returns an empty mapping."""
        return {}

    def host_stepping_info(self) -> HostSteppingInfo | None:
        """How physics is stepped on the host (engine, threads, staging); ``None`` when not on the host."""
        return None

    def physics_warnings(self) -> PhysicsWarnings | None:
        """MuJoCo warning counts since construction; ``None`` when the backend keeps no such counters."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, default is nothing to release
        """Release worker threads and device resources; idempotent."""
