"""Host stepping engines for the MuJoCo CPU backend; both write the packed float32 state rows.

``threads``: one persistent ``MjData`` per world, ``mj_step`` in place on a :class:`WorkerPool`
whose threads release the GIL inside MuJoCo. ``batch``: MuJoCo's own C thread pool
(``mujoco.batch.Batch``) over per-world state rows. Both keep the full integration state (including
``qacc_warmstart``) per world, so each world's trajectory is independent of thread count and of the
other worlds. ``mujoco.rollout`` is NOT an engine: it returns no warm-start or actuator force, so
it is only the raw physics reference in the benchmark (see docs/backends.md).
"""

from __future__ import annotations

from typing import Literal, Protocol

import mujoco
import numpy as np

from soakbench.runtime.backends._host_pool import WorkerPool, split_chunks
from soakbench.runtime.backends._layout import StateLayout

EngineName = Literal["threads", "batch"]
ENGINES: tuple[str, ...] = ("threads", "batch")
# mjtWarning names in index order, e.g. "badqacc" for mjWARN_BADQACC (the layout of MjData.warning).
WARNING_NAMES: tuple[str, ...] = tuple(
    name.removeprefix("mjWARN_").lower()
    for name, _ in sorted(mujoco.mjtWarning.__members__.items(), key=lambda item: int(item[1]))
    if name.startswith("mjWARN_")  # mjNWARNING is the count, not a warning
)


class HostEngine(Protocol):
    """Steps N worlds on the host and packs ``qpos|qvel|sensordata|actuator_force`` rows."""

    num_threads: int

    def pack_all(self, packed: np.ndarray) -> None:
        """Pack every world's current state into ``packed`` [N, W]."""

    def step(self, ctrl: np.ndarray, nstep: int, packed: np.ndarray) -> None:
        """Apply ``ctrl`` [N, nu] float64, run ``nstep`` substeps, pack every row of ``packed`` [N, W]."""

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, packed: np.ndarray) -> None:
        """Reset worlds ``rows`` [k] (sorted, unique) to defaults, write ``qpos`` [k, nq] and ``qvel``
        [k, nv], run ``mj_forward`` for them only and pack their rows. Other rows are untouched."""

    def warning_counts(self) -> np.ndarray:
        """[N, len(WARNING_NAMES)] int64: MuJoCo warnings raised per world since construction (resets
        included; MuJoCo zeroes its own counters on reset). Cold path."""

    def close(self) -> None:
        """Release threads; idempotent."""


class ThreadsEngine:
    """``mj_step`` in place on persistent MjData, chunked over a persistent thread pool."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, num_threads: int, layout: StateLayout) -> None:
        self.model = model
        self.layout = layout
        self.datas = [mujoco.MjData(model) for _ in range(num_envs)]
        self.pool = WorkerPool(split_chunks(num_envs, num_threads))
        self.num_threads = self.pool.num_lanes
        # warnings of earlier episodes: mj_resetData zeroes MjData.warning, so counts move here first
        self._retired = np.zeros((num_envs, len(WARNING_NAMES)), dtype=np.int64)
        for data in self.datas:
            mujoco.mj_forward(model, data)

    def _pack(self, index: int, packed: np.ndarray) -> None:
        data, s = self.datas[index], self.layout
        row = packed[index]
        a = s.nq
        b = a + s.nv
        c = b + s.nsensordata
        row[:a] = data.qpos
        row[a:b] = data.qvel
        row[b:c] = data.sensordata
        row[c:] = data.actuator_force

    def pack_all(self, packed: np.ndarray) -> None:
        """Pack every world's current state (used once at construction)."""
        for i in range(len(self.datas)):
            self._pack(i, packed)

    def step(self, ctrl: np.ndarray, nstep: int, packed: np.ndarray) -> None:
        model, datas, mj_step, pack = self.model, self.datas, mujoco.mj_step, self._pack

        def chunk(start: int, stop: int) -> None:
            for i in range(start, stop):
                data = datas[i]
                data.ctrl[:] = ctrl[i]
                mj_step(model, data, nstep)  # releases the GIL for all substeps
                pack(i, packed)

        self.pool.run(chunk)

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, packed: np.ndarray) -> None:
        for j, i in enumerate(rows.tolist()):
            data = self.datas[i]
            self._retired[i] += data.warning.number
            mujoco.mj_resetData(self.model, data)  # zeroes ctrl, warm start, time, applied forces
            data.qpos[:] = qpos[j]
            data.qvel[:] = qvel[j]
            mujoco.mj_forward(self.model, data)
            self._pack(i, packed)

    def warning_counts(self) -> np.ndarray:
        counts: np.ndarray = self._retired + np.stack([data.warning.number for data in self.datas])
        return counts

    def close(self) -> None:
        self.pool.close()


class BatchEngine:
    """``mujoco.batch.Batch``: state rows stepped on MuJoCo's C thread pool (caller included)."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, num_threads: int, layout: StateLayout) -> None:
        from mujoco.batch import Batch  # mujoco >= 4.0

        self.layout = layout
        self.num_threads = max(1, min(num_threads, num_envs))
        self.batch = Batch(model, num_envs, nthread=self.num_threads, persistent=False)
        self._ctrl = self.batch.bind("ctrl")
        self._qpos = self.batch.bind("qpos")
        self._qvel = self.batch.bind("qvel")
        self._sens = self.batch.bind("sensordata") if layout.nsensordata else None
        self._force = self.batch.bind("actuator_force")
        # live [N, nwarn, 2] int32 (lastinfo, number) since each world's last reset; earlier episodes'
        # counts move to _retired before a reset zeroes them
        self._warning: np.ndarray = self.batch.warning
        self._retired = np.zeros((num_envs, len(WARNING_NAMES)), dtype=np.int64)
        self.batch.reset()  # defaults + mj_forward for every world

    def _pack(self, packed: np.ndarray, rows: np.ndarray | None) -> None:
        s = self.layout
        a = s.nq
        b = a + s.nv
        c = b + s.nsensordata
        sel = slice(None) if rows is None else rows
        packed[sel, :a] = self._qpos[sel]
        packed[sel, a:b] = self._qvel[sel]
        if self._sens is not None:
            packed[sel, b:c] = self._sens[sel]
        packed[sel, c:] = self._force[sel]

    def pack_all(self, packed: np.ndarray) -> None:
        self._pack(packed, None)

    def step(self, ctrl: np.ndarray, nstep: int, packed: np.ndarray) -> None:
        self._ctrl[...] = ctrl
        self.batch.step(nstep=nstep)
        self._pack(packed, None)

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray, packed: np.ndarray) -> None:
        ids = rows.astype(np.int32)
        self._retired[ids] += self._warning[ids, :, 1]
        self.batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        self._qpos[ids] = qpos
        self._qvel[ids] = qvel
        self.batch.forward(ids)
        self._pack(packed, ids)

    def warning_counts(self) -> np.ndarray:
        counts: np.ndarray = self._retired + self._warning[:, :, 1]
        return counts

    def close(self) -> None:
        pass


def make_engine(
    name: str, model: mujoco.MjModel, num_envs: int, num_threads: int, layout: StateLayout
) -> HostEngine:
    """Build engine ``name`` (one of :data:`ENGINES`)."""
    if name == "threads":
        return ThreadsEngine(model, num_envs, num_threads, layout)
    if name == "batch":
        return BatchEngine(model, num_envs, num_threads, layout)
    raise ValueError(f"unknown MuJoCo host engine {name!r}; allowed: {', '.join(ENGINES)}")
