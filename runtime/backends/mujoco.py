"""MuJoCo CPU backend (``host_bridge``): physics authoritative on the host, stepped in parallel.

Per control step exactly two bridge copies are made, and counted:

* ``d2h/physics_exchange``: the ``ctrl`` tensor [N, nu] (on ``device``) -> one host float64 buffer;
* ``h2d/physics_exchange``: the packed host rows [N, W] float32 (``qpos|qvel|sensordata|
  actuator_force``) -> one persistent tensor on ``device`` that :class:`PublicState` views split.

Direction names read from the physics' point of view of the tensor device: ``d2h`` leaves the tensor
device for host physics, ``h2d`` brings host physics results to the tensor device (on a CPU tensor
device both are host memcpys, counted the same way so the probe's inventory is device-independent).

The published :class:`PublicState` tensors are live views of one persistent buffer, valid until the
next ``step``/``reset_rows`` (same rule as the zero-copy MJWarp backend): clone what you keep.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import torch

from soakbench.runtime.backends._layout import StateLayout
from soakbench.runtime.backends._mujoco_engines import ENGINES, WARNING_NAMES, make_engine
from soakbench.runtime.backends.base import PublicState, SimBackend
from soakbench.runtime.backends.contract import (
    BackendCapabilities,
    HostSteppingInfo,
    OptimizationDiagnostic,
    PhysicsWarnings,
    PlatformView,
    TransferCount,
    TransferDeclaration,
)
from soakbench.runtime.backends.validation import check_ctrl, check_reset_args

DEFAULT_ENGINE = "batch"  # measured faster than "threads" on G1 (docs/backends.md)
# Warnings on which mj_step resets the world to the model defaults by itself (auto-reset): the task
# never sees that reset, so these are counted and reported instead of staying silent.
AUTO_RESET_WARNINGS: tuple[str, ...] = ("badqpos", "badqvel", "badqacc")


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware; ``os.cpu_count()`` where affinity is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


class MujocoBackend(SimBackend):
    """N persistent MuJoCo worlds on host threads behind the tensor contract.

    Args:
        model: compiled ``mujoco.MjModel`` (shared read-only by every world).
        num_envs: N worlds.
        device: tensor device of ``step``'s input and of the published state.
        decimation: physics substeps per control step.
        num_threads: host threads stepping physics (the caller's included); ``None`` -> every CPU
            this process may use. Clamped to ``num_envs``.
        engine: ``"batch"`` (default: ``mujoco.batch.Batch``, MuJoCo's persistent C thread pool over
            per-world state rows, GIL released) or ``"threads"`` (``mj_step`` in place on one
            persistent MjData per world, on a persistent Python thread pool). Both are bit-identical;
            see docs/backends.md for the measurement behind the default.
    """

    backend_type = "mujoco"
    data_plane = "host_bridge"

    # (phase, direction, at most per control step, what is copied); docs/backends.md "Transfers"
    TRANSFER_INVENTORY = (
        TransferDeclaration(
            "physics_exchange",
            "d2h",
            1,
            "packed ctrl [N, nu] from the tensor device into the host physics buffer",
        ),
        TransferDeclaration(
            "physics_exchange",
            "h2d",
            1,
            "packed qpos|qvel|sensordata|actuator_force [N, W] float32 to the tensor device",
        ),
        TransferDeclaration(
            "backend_reset",
            "d2h",
            1,
            "packed rows|qpos|qvel [k, 1+nq+nv] float64 of the reset rows to the host",
        ),
        TransferDeclaration(
            "backend_reset",
            "h2d",
            1,
            "packed public state [k, W] of the reset rows back to the tensor device",
        ),
    )

    @classmethod
    def capabilities(cls, platform: PlatformView) -> BackendCapabilities:
        """Host physics runs wherever MuJoCo does; nothing is captured, every bridge copy is declared."""
        return BackendCapabilities(
            data_plane=cls.data_plane,
            physics_device="cpu",
            unavailable_reason=None,
            process_model="spawned collector; MuJoCo worlds stepped on a host thread pool",
            cuda_graph_requested=False,
            cuda_graph_possible=False,
            host_transfers=cls.host_transfers_by_phase(),
        )

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: torch.device,
        decimation: int,
        *,
        num_threads: int | None = None,
        engine: str = DEFAULT_ENGINE,
    ) -> None:
        super().__init__(model, num_envs, device, decimation)
        if num_threads is not None and (isinstance(num_threads, bool) or num_threads < 1):
            raise ValueError(f"num_threads must be null or an integer >= 1, got {num_threads!r}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine_name = engine
        self.layout = StateLayout.of(model)
        self.requested_threads = available_cpus() if num_threads is None else int(num_threads)
        pin = self.device.type == "cuda"
        # Host staging buffers; pinned when the tensor device is CUDA so both copies are single DMAs.
        self._ctrl_host_t = torch.zeros((num_envs, self.layout.nu), dtype=torch.float64, pin_memory=pin)
        self._packed_host_t = torch.zeros((num_envs, self.layout.width), dtype=torch.float32, pin_memory=pin)
        self._ctrl_host = self._ctrl_host_t.numpy()
        self._packed_host = self._packed_host_t.numpy()
        self._state = torch.zeros((num_envs, self.layout.width), dtype=torch.float32, device=self.device)
        self._public = self.layout.split(self._state)
        self._counters: dict[str, TransferCount] = {}
        self._engine = make_engine(engine, model, num_envs, self.requested_threads, self.layout)
        self._closed = False
        self._engine.pack_all(self._packed_host)
        self._state.copy_(self._packed_host_t)
        self._count("h2d/backend_init", self._packed_host.nbytes)

    # -- contract -------------------------------------------------------------------------------
    def step(self, ctrl: torch.Tensor) -> PublicState:
        """Apply ``ctrl`` [N, nu] (finite) and run ``decimation`` substeps in every world."""
        self._check_open()
        check_ctrl(ctrl, self.num_envs, self.layout.nu)
        self._ctrl_host_t.copy_(ctrl.detach())  # the one packed control copy (dtype cast included)
        self._count("d2h/physics_exchange", ctrl.numel() * ctrl.element_size())
        if not np.isfinite(self._ctrl_host).all():
            bad = np.flatnonzero(~np.isfinite(self._ctrl_host).all(axis=1))
            raise ValueError(f"ctrl has non-finite values in rows {bad[:8].tolist()} (must be finite)")
        self._engine.step(self._ctrl_host, self.decimation, self._packed_host)
        self._state.copy_(self._packed_host_t)  # the one packed state copy
        self._count("h2d/physics_exchange", self._packed_host.nbytes)
        return self._public

    def reset_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> PublicState:
        """Reset worlds ``rows`` [k] to ``qpos`` [k, nq] / ``qvel`` [k, nv]; other rows untouched."""
        self._check_open()
        check_reset_args(rows, qpos, qvel, self.num_envs, (self.layout.nq, self.layout.nv))
        if rows.numel() == 0:
            return self._public
        payload = torch.cat(
            [rows.detach().to(torch.float64).unsqueeze(1), qpos.detach().double(), qvel.detach().double()],
            dim=1,
        ).cpu()  # one packed copy of rows|qpos|qvel
        self._count("d2h/backend_reset", payload.numel() * payload.element_size())
        host = payload.numpy()
        ids = host[:, 0].astype(np.int64)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        nq = self.layout.nq
        qpos_h = np.ascontiguousarray(host[order, 1 : 1 + nq])
        qvel_h = np.ascontiguousarray(host[order, 1 + nq :])
        if not (np.isfinite(qpos_h).all() and np.isfinite(qvel_h).all()):
            raise ValueError("reset_rows: qpos and qvel must be finite")
        self._engine.reset(ids, qpos_h, qvel_h, self._packed_host)
        rows_out = torch.from_numpy(self._packed_host[ids])  # gather on the host, then one copy
        self._state[torch.from_numpy(ids).to(self.device)] = rows_out.to(self.device)
        self._count("h2d/backend_reset", rows_out.numel() * rows_out.element_size())
        return self._public

    def public_state(self) -> PublicState:
        """Live views of the last published state (valid until the next step/reset_rows)."""
        return self._public

    def get_tensor_runtime_diagnostics(self) -> dict[str, OptimizationDiagnostic]:
        threads = self._engine.num_threads
        if threads > 1:
            parallel = OptimizationDiagnostic(requested=True, enabled=True, disable_reason=None)
        elif self.requested_threads <= 1:
            parallel = OptimizationDiagnostic(
                requested=True, enabled=False, disable_reason="num_threads resolved to 1 (physics_threads=1)"
            )
        else:
            parallel = OptimizationDiagnostic(
                requested=True, enabled=False, disable_reason="num_envs is 1: nothing to step in parallel"
            )
        return {"parallel_host_stepping": parallel}

    def host_stepping_info(self) -> HostSteppingInfo:
        """Cold-path facts for artifacts: engine, thread count, decimation, staging pinned or not."""
        return {
            "engine": self.engine_name,
            "num_threads": self._engine.num_threads,
            "requested_threads": self.requested_threads,
            "decimation": self.decimation,
            "pinned_staging": bool(self._packed_host_t.is_pinned()),
            "packed_row_width": self.layout.width,
        }

    def warning_counts(self) -> np.ndarray:
        """[N, len(WARNING_NAMES)] int64 MuJoCo warnings per world since construction (cold path)."""
        return self._engine.warning_counts()

    def physics_warnings(self) -> PhysicsWarnings:
        """Cold-path summary of :meth:`warning_counts` for artifacts: per warning ``{total, worlds}``
        (worlds = how many worlds raised it), plus ``auto_resets`` / ``auto_reset_worlds``: warnings on
        which MuJoCo silently reset a world to the model defaults (bad qpos/qvel/qacc)."""
        counts = self.warning_counts()
        auto = counts[:, [WARNING_NAMES.index(name) for name in AUTO_RESET_WARNINGS]].sum(axis=1)
        return {
            "counts": {
                name: {"total": int(counts[:, i].sum()), "worlds": int((counts[:, i] > 0).sum())}
                for i, name in enumerate(WARNING_NAMES)
            },
            "auto_resets": int(auto.sum()),
            "auto_reset_worlds": int((auto > 0).sum()),
        }

    def transfer_counters(self) -> dict[str, TransferCount]:
        return {
            key: TransferCount(count=value["count"], bytes=value["bytes"])
            for key, value in self._counters.items()
        }

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.close()

    # -- helpers ----------------------------------------------------------------------------------
    def _count(self, key: str, nbytes: int) -> None:
        entry = self._counters.setdefault(key, TransferCount(count=0, bytes=0))
        entry["count"] += 1
        entry["bytes"] += int(nbytes)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("MujocoBackend used after close()")
