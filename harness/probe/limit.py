"""Physics-limit references for the phase probe, measured inside the backend's worker process.

The reference steps the same compiled model, the same number of worlds and (on CPU) the same number of
threads as the env under test, with nothing but physics in the loop:

- MuJoCo CPU: ``mujoco.rollout`` (persistent thread pool, ``nthread`` = the backend's physics threads),
  controls held constant, from the worlds' current states.
- MuJoCo Warp on CUDA: ``decimation`` × ``mujoco_warp.step`` captured once in a CUDA graph and replayed.
- MuJoCo Warp on the CPU diagnostic device: eager ``mujoco_warp.step`` (Warp has no graphs on CPU).

Each reference is built once and then measured in blocks that the worker interleaves with blocks of
env steps, so the env/limit ratio of each round is taken under the same host load.

Only the worker imports this module (mujoco, numpy and, for mjwarp, warp are imported in the functions).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

import numpy as np

if TYPE_CHECKING:
    import mujoco

# Control steps per mujoco.rollout call (at most): long enough to amortise the pool dispatch, short
# enough that the recorded output trajectory (worlds × steps × nstate doubles) stays small at 8192 worlds.
ROLLOUT_CONTROL_STEPS_PER_CALL = 10
# A limit block keeps measuring (in whole calls / control steps) until at least this much wall time has
# passed, so a short block does not turn the reference into a timer-resolution measurement...
MIN_BLOCK_SECONDS = 0.1
# ...but never beyond this multiple of the requested control steps (bounds a slow diagnostic lane).
MAX_LIMIT_EXTENSION = 20


class LimitDescription(TypedDict):
    """How a physics-limit reference steps (the artifact's ``physics_limit`` block before the rates)."""

    method: str
    worlds: int
    threads: int | None
    device: str
    cuda_graph: bool
    data_sizes: NotRequired[dict[str, int]]


class PhysicsLimit(Protocol):
    """A reference built once and measured in blocks; a context manager that releases its resources."""

    describe: LimitDescription

    def measure(self, control_steps: int, min_seconds: float = ...) -> tuple[int, float]:
        """Time at least ``control_steps`` control steps; returns (physics steps over all worlds, seconds)."""

    def __enter__(self) -> PhysicsLimit: ...

    def __exit__(self, *exc: object) -> None: ...


def hold_controls(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """Controls [N, nu] that hold each joint-driven actuator at its joint's current position (0 for other
    transmissions), clipped to ``actuator_ctrlrange`` where limited. ``qpos`` is [N, nq]."""
    ctrl = np.zeros((qpos.shape[0], model.nu), dtype=np.float64)
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) == 0:  # mjTRN_JOINT
            joint = int(model.actuator_trnid[a, 0])
            ctrl[:, a] = qpos[:, int(model.jnt_qposadr[joint])]
        if int(model.actuator_ctrllimited[a]):
            low, high = model.actuator_ctrlrange[a]
            ctrl[:, a] = np.clip(ctrl[:, a], low, high)
    return ctrl


def _timed(
    step: Callable[[], None], calls: int, min_seconds: float, finish: Callable[[], None]
) -> tuple[int, float]:
    """Run ``step`` at least ``calls`` times, extended until ``min_seconds`` have passed (capped at
    ``MAX_LIMIT_EXTENSION`` × ``calls``); ``finish`` waits for queued work. Returns (calls run, seconds)."""
    done = 0
    start = time.perf_counter()
    while done < calls or (time.perf_counter() - start < min_seconds and done < calls * MAX_LIMIT_EXTENSION):
        step()
        done += 1
    finish()
    return done, time.perf_counter() - start


class MujocoRolloutLimit:
    """Raw MuJoCo CPU physics of ``N = qpos.shape[0]`` worlds on ``threads`` threads (``mujoco.rollout``
    on a persistent pool), every call starting from the worlds' states ``qpos`` [N, nq], ``qvel`` [N, nv]
    with held controls. Built once; :meth:`measure` times one block. Close it (or use ``with``)."""

    def __init__(
        self,
        model: mujoco.MjModel,
        qpos: np.ndarray,
        qvel: np.ndarray,
        threads: int,
        decimation: int,
        steps_per_call: int,
    ) -> None:
        import mujoco
        import mujoco.rollout

        n = qpos.shape[0]
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        data = mujoco.MjData(model)
        nstate = mujoco.mj_stateSize(model, spec)
        self._initial = np.empty((n, nstate), dtype=np.float64)
        for world in range(n):
            mujoco.mj_resetData(model, data)
            data.qpos[:] = qpos[world]
            data.qvel[:] = qvel[world]
            mujoco.mj_getState(model, data, self._initial[world], spec)
        self._control = hold_controls(model, qpos)[:, None, :]  # [N, 1, nu], tiled over steps by rollout
        self.steps_per_call = max(1, min(steps_per_call, ROLLOUT_CONTROL_STEPS_PER_CALL))
        self._nstep = decimation * self.steps_per_call
        self._models = [model] * n
        self._datas = [mujoco.MjData(model) for _ in range(max(1, threads))]
        self._state_out = np.empty((n, self._nstep, nstate), dtype=np.float64)
        self._sensor_out = np.empty((n, self._nstep, model.nsensordata), dtype=np.float64)
        self._pool = mujoco.rollout.Rollout(nthread=threads if threads > 1 else 0)
        self.describe = LimitDescription(
            method="mujoco.rollout", worlds=n, threads=threads, device="cpu", cuda_graph=False
        )
        self._once()  # warm-up: pool start, page faults

    def _once(self) -> None:
        self._pool.rollout(
            self._models, self._datas, self._initial, self._control, nstep=self._nstep,
            state=self._state_out, sensordata=self._sensor_out,
        )  # fmt: skip

    def measure(self, control_steps: int, min_seconds: float = MIN_BLOCK_SECONDS) -> tuple[int, float]:
        """Time at least ``control_steps`` control steps (whole calls) per world; returns
        (physics steps over all worlds, seconds)."""
        calls = max(1, math.ceil(control_steps / self.steps_per_call))
        done, elapsed = _timed(self._once, calls, min_seconds, lambda: None)
        return len(self._models) * self._nstep * done, elapsed

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> MujocoRolloutLimit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MjwarpLimit:
    """Raw MuJoCo Warp physics of ``N = qpos.shape[0]`` worlds on ``device`` ("cuda:K" or "cpu").

    On CUDA the ``decimation`` substeps are captured once as a graph and replayed; on CPU they are
    stepped eagerly. ``mjw.make_data`` gets MJWarp's default contact/constraint capacities for the model
    and world count, exactly as the backend does, so both step identical buffers. The worlds keep
    stepping across blocks (held controls)."""

    def __init__(
        self, model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, device: str, decimation: int
    ) -> None:
        import mujoco_warp as mjw
        import warp as wp

        self._wp, self._mjw, self.device, self.decimation = wp, mjw, device, decimation
        n = qpos.shape[0]
        self.use_graph = device.startswith("cuda")
        with wp.ScopedDevice(device):
            self._m = mjw.put_model(model)
            self._d = mjw.make_data(model, nworld=n)
            self._d.qpos.assign(wp.array(qpos.astype(np.float32), dtype=float))
            self._d.qvel.assign(wp.array(qvel.astype(np.float32), dtype=float))
            self._d.ctrl.assign(wp.array(hold_controls(model, qpos).astype(np.float32), dtype=float))
            mjw.forward(self._m, self._d)
            self._substeps()  # warm-up: kernel compile/load outside the timed region
            wp.synchronize_device()
            self._graph = None
            if self.use_graph:
                with wp.ScopedCapture() as capture:
                    self._substeps()
                self._graph = capture.graph
                wp.capture_launch(self._graph)
                wp.synchronize_device()
        method = "mujoco_warp.step (CUDA graph replay)" if self.use_graph else "mujoco_warp.step (eager, CPU)"
        self.describe = LimitDescription(
            method=method,
            worlds=n,
            threads=None,
            device=device,
            cuda_graph=self.use_graph,
            data_sizes={"naconmax": int(self._d.naconmax), "njmax": int(self._d.njmax)},
        )
        self._worlds = n

    def _substeps(self) -> None:
        for _ in range(self.decimation):
            self._mjw.step(self._m, self._d)

    def _once(self) -> None:
        if self._graph is not None:
            self._wp.capture_launch(self._graph)
        else:
            self._substeps()

    def measure(self, control_steps: int, min_seconds: float = MIN_BLOCK_SECONDS) -> tuple[int, float]:
        """Time at least ``control_steps`` control steps; returns (physics steps over all worlds, s)."""
        wp = self._wp
        with wp.ScopedDevice(self.device):
            done, elapsed = _timed(self._once, max(1, control_steps), min_seconds, wp.synchronize_device)
        return self._worlds * self.decimation * done, elapsed

    def close(self) -> None:
        self._graph = None

    def __enter__(self) -> MjwarpLimit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
