"""Physics-limit references for the phase probe, measured inside the backend's worker process.

The reference steps the same compiled model, the same number of worlds and (on CPU) the same number of
threads as the env under test, with nothing but physics in the loop:

- MuJoCo CPU: ``mujoco.rollout`` (persistent thread pool, ``nthread`` = the backend's physics threads),
  controls held constant, from the worlds' current states.
- MuJoCo Warp on CUDA: ``decimation`` × ``mujoco_warp.step`` captured once in a CUDA graph and replayed.
- MuJoCo Warp on the CPU diagnostic device: eager ``mujoco_warp.step`` (Warp has no graphs on CPU).

Only the worker imports this module (mujoco, numpy and, for mjwarp, warp are imported in the functions).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

# Control steps per mujoco.rollout call: long enough to amortise the pool dispatch, short enough that
# the recorded output trajectory (worlds × steps × nstate doubles) stays small at 8192 worlds.
ROLLOUT_CONTROL_STEPS_PER_CALL = 10
# Keep measuring (in whole calls / control steps) until at least this much wall time has passed, so a
# short ``--iters`` does not turn the reference into a timer-resolution measurement.
MIN_LIMIT_SECONDS = 0.5
# ...but never beyond this multiple of the requested control steps (bounds a slow diagnostic lane).
MAX_LIMIT_EXTENSION = 20


def hold_controls(model: Any, qpos: np.ndarray) -> np.ndarray:
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


def mujoco_rollout_limit(
    model: Any, qpos: np.ndarray, qvel: np.ndarray, threads: int, decimation: int, control_steps: int
) -> dict[str, Any]:
    """Raw MuJoCo CPU physics rate of ``N = qpos.shape[0]`` worlds on ``threads`` threads.

    ``qpos`` [N, nq], ``qvel`` [N, nv] are the start states; ``control_steps`` × ``decimation`` physics
    steps are timed per world (rounded up to whole rollout calls, extended to at least
    ``MIN_LIMIT_SECONDS``) after one untimed warm-up call.
    Returns ``{method, worlds, threads, device, cuda_graph, physics_steps, elapsed_s, physics_steps_per_s}``.
    """
    import mujoco
    import mujoco.rollout

    n = qpos.shape[0]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    nstate = mujoco.mj_stateSize(model, spec)
    initial = np.empty((n, nstate), dtype=np.float64)
    for world in range(n):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = qpos[world]
        data.qvel[:] = qvel[world]
        mujoco.mj_getState(model, data, initial[world], spec)
    control = hold_controls(model, qpos)[:, None, :]  # [N, 1, nu], tiled over steps by rollout
    nstep = decimation * ROLLOUT_CONTROL_STEPS_PER_CALL
    calls = max(1, math.ceil(control_steps / ROLLOUT_CONTROL_STEPS_PER_CALL))
    datas = [mujoco.MjData(model) for _ in range(max(1, threads))]
    state_out = np.empty((n, nstep, nstate), dtype=np.float64)
    sensor_out = np.empty((n, nstep, model.nsensordata), dtype=np.float64)
    with mujoco.rollout.Rollout(nthread=threads if threads > 1 else 0) as rollout:

        def once() -> None:
            rollout.rollout(
                [model] * n, datas, initial, control, nstep=nstep, state=state_out, sensordata=sensor_out
            )

        once()  # warm-up: pool start, page faults
        done = 0
        start = time.perf_counter()
        while done < calls or (
            time.perf_counter() - start < MIN_LIMIT_SECONDS and done < calls * MAX_LIMIT_EXTENSION
        ):
            once()
            done += 1
        elapsed = time.perf_counter() - start
    steps = n * nstep * done
    return {
        "method": "mujoco.rollout",
        "worlds": n,
        "threads": threads,
        "device": "cpu",
        "cuda_graph": False,
        "physics_steps": steps,
        "elapsed_s": elapsed,
        "physics_steps_per_s": steps / elapsed,
    }


def mjwarp_limit(
    model: Any,
    qpos: np.ndarray,
    qvel: np.ndarray,
    device: str,
    decimation: int,
    control_steps: int,
    data_kwargs: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Raw MuJoCo Warp physics rate of ``N = qpos.shape[0]`` worlds on ``device`` ("cuda:K" or "cpu").

    On CUDA the ``decimation`` substeps are captured once as a graph and replayed ``control_steps`` times;
    on CPU they are stepped eagerly. ``data_kwargs`` are the backend's ``make_data`` sizes (nconmax,
    njmax, ...) so both step identical buffers.
    """
    import mujoco
    import mujoco_warp as mjw
    import warp as wp

    n = qpos.shape[0]
    kwargs = dict(data_kwargs or {})
    use_graph = device.startswith("cuda")
    with wp.ScopedDevice(device):
        m = mjw.put_model(model)
        d = mjw.make_data(model, nworld=n, **kwargs)
        d.qpos.assign(wp.array(qpos.astype(np.float32), dtype=float))
        d.qvel.assign(wp.array(qvel.astype(np.float32), dtype=float))
        d.ctrl.assign(wp.array(hold_controls(model, qpos).astype(np.float32), dtype=float))
        mjw.forward(m, d)
        for _ in range(decimation):  # warm-up: kernel compile/load outside the timed region
            mjw.step(m, d)
        wp.synchronize_device()

        graph = None
        if use_graph:
            with wp.ScopedCapture() as capture:
                for _ in range(decimation):
                    mjw.step(m, d)
            graph = capture.graph
            wp.capture_launch(graph)
            wp.synchronize_device()

        done = 0
        start = time.perf_counter()
        while done < control_steps or (
            time.perf_counter() - start < MIN_LIMIT_SECONDS and done < control_steps * MAX_LIMIT_EXTENSION
        ):
            if graph is not None:
                wp.capture_launch(graph)
            else:
                for _ in range(decimation):
                    mjw.step(m, d)
            done += 1
        wp.synchronize_device()
        elapsed = time.perf_counter() - start
        sizes = {"naconmax": int(getattr(d, "naconmax", -1)), "njmax": int(getattr(d, "njmax", -1))}
    del mujoco  # imported to fail early with a clear ImportError when MuJoCo itself is missing
    steps = n * decimation * done
    return {
        "method": "mujoco_warp.step (CUDA graph replay)" if use_graph else "mujoco_warp.step (eager, CPU)",
        "worlds": n,
        "threads": None,
        "device": device,
        "cuda_graph": use_graph,
        "physics_steps": steps,
        "elapsed_s": elapsed,
        "physics_steps_per_s": steps / elapsed,
        "data_sizes": sizes,
    }
