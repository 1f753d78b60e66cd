"""One isolated backend measurement of the phase probe (run as ``python -m harness.probe_worker SPEC OUT``).

The parent (``harness.probe``) starts one such process per backend and reads its result JSON. Here:
compose the owner config, build the env with ``runtime.env.make_env``, time ``warmup`` + 2 × ``iters``
env steps of seeded random actions, and measure the physics limit of the same model, worlds and threads
in this same process.

Two measured loops of ``iters`` iterations each, sharing one warm env:
1. *phased*: a ``PhaseTimer`` is passed to ``env.step`` (device sync at every phase boundary) -> per
   phase statistics and the synchronized ``iteration_ms``;
2. *throughput*: ``env.step`` without a timer, synchronized only at iteration boundaries -> the headline
   ``throughput_env_control_steps_per_s`` (phase syncs would otherwise serialize GPU work). It runs in
   ``rounds`` blocks, each right after a physics-limit block, so load changes on a shared host hit both
   sides of each round's ratio; ``efficiency`` is the median round.
Action sampling happens before each iteration's clock starts (policy inference is excluded).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foundation.atomic import write_atomic
from harness.probe_stats import (
    PROBE_PHASES,
    counter_delta,
    interleaved_efficiency,
    per_iteration_phase_ms,
    phase_report,
    split_blocks,
    summarize_ms,
    throughput,
    transfer_report,
)


def _backend_diagnostics(backend: Any) -> dict[str, Any]:
    """Manifest-style payload: available with diagnostics, or an explicit unavailable marker."""
    backend_type = str(getattr(backend, "backend_type", type(backend).__name__))
    try:
        diagnostics = backend.get_tensor_runtime_diagnostics()
    except Exception as exc:
        return {
            "available": False,
            "backend_type": backend_type,
            "unavailable_reason": f"get_tensor_runtime_diagnostics raised {type(exc).__name__}: {exc}",
        }
    return {
        "available": True,
        "backend_type": backend_type,
        "diagnostics": json.loads(json.dumps(diagnostics)),
    }


def _inventory(backend: Any) -> tuple[bool, list[dict[str, Any]]]:
    fn = getattr(backend, "transfer_inventory", None)
    if fn is None:
        return False, []
    return True, [dict(item) for item in fn()]


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one backend as described by ``spec`` (keys: backend, algo, task, overrides, warmup, iters,
    seed, torch_threads, rounds). Returns the per-backend artifact block (plain JSON)."""
    import torch

    # Before any torch work: the collector's intra-op thread count (spec["torch_threads"], recorded).
    torch.set_num_threads(int(spec["torch_threads"]))

    from harness.probe_limit import MjwarpLimit, MujocoRolloutLimit
    from runtime.config import compose
    from runtime.env import make_env
    from runtime.timing import PhaseTimer

    backend_name = str(spec["backend"])
    warmup, iters, seed = (int(spec[k]) for k in ("warmup", "iters", "seed"))
    # the same overrides the launcher's precondition check composed (harness.probe.config_overrides)
    cfg = compose(str(spec["algo"]), str(spec["task"]), backend_name, [str(o) for o in spec["overrides"]])

    t0 = time.perf_counter()
    env = make_env(cfg, seed=seed)
    setup_s = time.perf_counter() - t0
    try:
        device = torch.device(env.device)
        backend = env.backend

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        generator = torch.Generator(device=device)
        generator.manual_seed(seed)

        def actions() -> torch.Tensor:
            return torch.rand((env.num_envs, env.action_dim), generator=generator, device=device) * 2.0 - 1.0

        env.reset()
        t0 = time.perf_counter()
        for _ in range(warmup):
            env.step(actions())
        sync()
        warmup_s = time.perf_counter() - t0

        inventory_declared, inventory = _inventory(backend)
        episodes = 0
        per_step_transfers: list[dict[str, dict[str, int]]] = []
        counters_start = backend.transfer_counters()

        def timed_loop(
            timer: PhaseTimer | None, count: int
        ) -> tuple[list[float], list[dict[str, list[float]]]]:
            nonlocal episodes
            iteration_ms: list[float] = []
            phase_samples: list[dict[str, list[float]]] = []
            for _ in range(count):
                act = actions()
                before_counts = backend.transfer_counters()
                lengths = {} if timer is None else {k: len(v) for k, v in timer.samples_ms.items()}
                sync()
                start = time.perf_counter()
                out = env.step(act, timer=timer)
                sync()
                iteration_ms.append((time.perf_counter() - start) * 1e3)
                if timer is not None:
                    phase_samples.append({k: v[lengths.get(k, 0) :] for k, v in timer.samples_ms.items()})
                per_step_transfers.append(counter_delta(before_counts, backend.transfer_counters()))
                episodes += int(out.episode_lengths.numel())
            return iteration_ms, phase_samples

        timer = PhaseTimer(device)
        phased_ms, phase_samples = timed_loop(timer, iters)

        # The physics limit of the same compiled model (the backend's own when it exposes one, env-side
        # edits included; else the task's scene compiled afresh), worlds and threads, from the worlds'
        # states after the phased loop.
        state = backend.public_state()
        qpos = state.qpos.detach().to("cpu", torch.float64).numpy().copy()
        qvel = state.qvel.detach().to("cpu", torch.float64).numpy().copy()
        model = getattr(backend, "model", None)
        if model is None:
            from runtime.assets import load_model

            model = load_model(str(cfg.task.scene))
        decimation = int(backend.decimation)
        blocks = split_blocks(iters, int(spec["rounds"]))
        host_info = backend.host_stepping_info() if hasattr(backend, "host_stepping_info") else None
        threads: int | None = None
        limit: MujocoRolloutLimit | MjwarpLimit
        if backend_name == "mjwarp":
            warp_device = "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"
            # Same contact/constraint capacities as the backend when it states them (``None`` otherwise:
            # both then use mujoco_warp's defaults for this model and world count).
            sizes = getattr(backend, "make_data_kwargs", None)
            data_kwargs = sizes() if callable(sizes) else sizes
            limit = MjwarpLimit(model, qpos, qvel, warp_device, decimation, data_kwargs)
        else:
            threads = int((host_info or {}).get("num_threads", cfg.resolved.physics_threads))
            limit = MujocoRolloutLimit(model, qpos, qvel, threads, decimation, max(blocks))

        # Throughput: rounds of (physics-limit block, env block) back to back, so each round's ratio
        # compares the two under the same host load; the efficiency is the median round.
        plain_ms: list[float] = []
        rounds: list[tuple[list[float], int, float]] = []
        physics_steps, physics_s = 0, 0.0
        with limit:
            for block in blocks:
                steps, seconds = limit.measure(block)
                block_ms, _ = timed_loop(None, block)
                rounds.append((block_ms, steps, seconds))
                plain_ms.extend(block_ms)
                physics_steps += steps
                physics_s += seconds
        counters_total = counter_delta(counters_start, backend.transfer_counters())

        per_phase = per_iteration_phase_ms(phase_samples, PROBE_PHASES)
        invocations = {p: len(timer.samples_ms.get(p, [])) for p in PROBE_PHASES}
        phases = phase_report(phased_ms, per_phase, invocations)
        env_throughput = throughput(env.num_envs, plain_ms)
        interleaved = interleaved_efficiency(env.num_envs, decimation, rounds)
        physics_limit = {
            **limit.describe,
            "physics_steps": physics_steps,
            "elapsed_s": physics_s,
            "physics_steps_per_s": physics_steps / physics_s,
            "control_steps_per_s": physics_steps / physics_s / decimation,
        }

        transfers = transfer_report(inventory, per_step_transfers)
        transfers["inventory_declared"] = inventory_declared
        transfers["counters_total"] = counters_total
        diagnostics = _backend_diagnostics(backend)
        # MuJoCo CPU only: warnings (and silent auto-resets) per world since construction; MJWarp has none
        warnings_fn = getattr(backend, "physics_warnings", None)
        physics_warnings = warnings_fn() if callable(warnings_fn) else None
        return {
            "backend": backend_name,
            "pid": os.getpid(),
            "parent_pid": os.getppid(),
            "owner": {
                "algo": str(cfg.owner.algo),
                "task": str(cfg.owner.task),
                "sim": str(cfg.owner.sim),
                "chain": [str(x) for x in cfg.owner.chain],
            },
            "device": str(device),
            "data_plane": str(backend.data_plane),
            "diagnostic_lane": backend_name == "mjwarp" and device.type == "cpu",
            "num_envs": int(env.num_envs),
            "obs_dim": int(env.obs_dim),
            "action_dim": int(env.action_dim),
            "decimation": decimation,
            "physics_threads": threads,
            "host_stepping": host_info,
            "warmup_iterations": warmup,
            "measured_iterations": iters,
            "setup_s": setup_s,
            "warmup_s": warmup_s,
            "episodes_finished": episodes,
            "phases": phases,
            "throughput_env_control_steps_per_s": env_throughput,
            "throughput_phased_env_control_steps_per_s": throughput(env.num_envs, phased_ms),
            "throughput_iteration_ms": summarize_ms(plain_ms),
            "physics_limit": physics_limit,
            "efficiency": interleaved["efficiency"],
            "rounds": interleaved["rounds"],
            "backend_diagnostics": diagnostics,
            "physics_warnings": physics_warnings,
            "transfers": transfers,
            "torch": {
                "version": torch.__version__,
                "cuda": torch.version.cuda,
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                "intra_op_threads": torch.get_num_threads(),
            },
        }
    finally:
        env.close()


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(payload, indent=2, allow_nan=False))


def main(
    argv: list[str] | None = None, runner: Callable[[dict[str, Any]], dict[str, Any]] = run_worker
) -> int:
    """``SPEC_JSON OUT_JSON``: writes ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m harness.probe_worker SPEC_JSON OUT_JSON", file=sys.stderr)
        return 2
    spec_path, out_path = Path(args[0]), Path(args[1])
    spec = json.loads(spec_path.read_text())
    try:
        payload: dict[str, Any] = {"ok": True, "result": runner(spec)}
        code = 0
    except Exception as exc:
        from runtime.config import ConfigError

        payload = {
            "ok": False,
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "config_error": isinstance(exc, ConfigError),
                "traceback": traceback.format_exc(),
            },
        }
        code = 1
    _write_json(out_path, payload)
    return code


if __name__ == "__main__":
    sys.exit(main())
