"""Pure logic of the phase probe: timing statistics, per-iteration phase accounting, transfer accounting
against a backend's declared inventory, efficiency, and the acceptance rules (profiler environment and
GPU idleness). Data in, data out: no processes, clocks or files here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.runtime.backends.contract import TransferCount
from soakbench.runtime.timing import PHASES

# The env's timed phases (runtime.timing): the probe reports exactly these and refuses any other name.
PROBE_PHASES: tuple[str, ...] = PHASES

# Profiler / debug hooks that change what is measured. Exact names and prefixes (case-sensitive).
PROFILER_ENV_EXACT: tuple[str, ...] = (
    "CUDA_INJECTION64_PATH",
    "CUDA_INJECTION32_PATH",
    "NVTX_INJECTION64_PATH",
    "NVTX_INJECTION32_PATH",
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TORCH_CUDA_SANITIZER",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "KINETO_USE_DAEMON",
)
PROFILER_ENV_PREFIXES: tuple[str, ...] = (
    "NSYS_",
    "NSIGHT_",
    "NCU_",
    "CUPTI_",
    "COMPUTE_SANITIZER",
    "CUDA_MEMCHECK",
    "COMPUTE_PROFILE",
    "CUDA_PROFILE",
)


def summarize_ms(samples: Sequence[float]) -> dict[str, float | int]:
    """``{count, total_ms, mean_ms, median_ms, p95_ms, min_ms, max_ms}`` of samples in milliseconds.

    p95 is the nearest-rank 95th percentile (a value that was actually observed).
    """
    if not samples:
        raise ValueError("cannot summarize an empty sample list")
    ordered = sorted(float(s) for s in samples)
    n = len(ordered)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    rank = max(1, math.ceil(0.95 * n))
    total = math.fsum(ordered)
    return {
        "count": n,
        "total_ms": total,
        "mean_ms": total / n,
        "median_ms": median,
        "p95_ms": ordered[rank - 1],
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
    }


def per_iteration_phase_ms(
    iteration_samples: Sequence[Mapping[str, Sequence[float]]], phases: Sequence[str] = PROBE_PHASES
) -> dict[str, list[float]]:
    """Per iteration, the time charged to each phase (sum of its timed sections in that iteration, 0.0
    when it did not run), so every phase has exactly one value per iteration.

    ``iteration_samples[i][phase]`` are the PhaseTimer samples recorded during iteration ``i``.
    Raises ValueError if an iteration recorded a phase name outside ``phases`` (an env timing something
    the probe would silently drop).
    """
    known = set(phases)
    out: dict[str, list[float]] = {p: [] for p in phases}
    for index, recorded in enumerate(iteration_samples):
        unknown = set(recorded) - known
        if unknown:
            raise ValueError(
                f"iteration {index} timed unknown phases {sorted(unknown)}; known: {list(phases)}"
            )
        for phase in phases:
            out[phase].append(math.fsum(recorded.get(phase, ())))
    return out


def phase_report(
    iteration_ms: Sequence[float], per_phase_ms: Mapping[str, Sequence[float]], invocations: Mapping[str, int]
) -> dict[str, dict[str, Any]]:
    """``phases`` block: ``<phase>_ms`` for every phase plus ``iteration_ms`` and ``unattributed_ms``
    (iteration minus the named phases: the env step's own glue plus timer synchronisation).

    Each entry is ``summarize_ms`` plus, for named phases, ``invocations`` (timed sections recorded,
    which may be fewer than iterations when an env skips an empty reset) and ``share_of_iteration``.
    """
    n = len(iteration_ms)
    total_iteration = math.fsum(iteration_ms)
    report: dict[str, dict[str, Any]] = {}
    residual = list(iteration_ms)
    for phase, values in per_phase_ms.items():
        if len(values) != n:
            raise ValueError(f"phase {phase} has {len(values)} per-iteration values, expected {n}")
        entry: dict[str, Any] = dict(summarize_ms(values))
        entry["invocations"] = int(invocations.get(phase, 0))
        entry["share_of_iteration"] = entry["total_ms"] / total_iteration if total_iteration > 0 else 0.0
        report[f"{phase}_ms"] = entry
        residual = [r - v for r, v in zip(residual, values, strict=True)]
    report["iteration_ms"] = dict(summarize_ms(iteration_ms))
    report["unattributed_ms"] = dict(summarize_ms(residual))
    return report


def throughput(num_envs: int, iteration_ms: Sequence[float]) -> float:
    """Env control steps per second: ``num_envs × iterations ÷ summed iteration wall time``."""
    total_s = math.fsum(iteration_ms) / 1e3
    if total_s <= 0:
        raise ValueError("iterations took no measurable time")
    return num_envs * len(iteration_ms) / total_s


def efficiency(throughput_env_steps_per_s: float, physics_steps_per_s: float, decimation: int) -> float:
    """``throughput ÷ (physics_limit ÷ decimation)``: share of the raw physics control-step rate reached
    by the full env step (1.0 = the env adds no cost over raw stepping of the same worlds)."""
    if physics_steps_per_s <= 0 or decimation < 1:
        raise ValueError("physics limit must be positive and decimation >= 1")
    return throughput_env_steps_per_s / (physics_steps_per_s / decimation)


def split_blocks(total: int, blocks: int) -> list[int]:
    """``total`` items as ``blocks`` block sizes differing by at most one, none empty (``blocks`` is
    clamped to ``1..total``)."""
    blocks = max(1, min(blocks, total))
    base, extra = divmod(total, blocks)
    return [base + (1 if i < extra else 0) for i in range(blocks)]


def interleaved_efficiency(
    num_envs: int, decimation: int, rounds: Sequence[tuple[Sequence[float], int, float]]
) -> dict[str, Any]:
    """Efficiency from interleaved rounds measured under the same load.

    ``rounds[i] = (env_iteration_ms, physics_steps, physics_s)``: the env block's per-iteration times
    (ms) and the physics-limit block measured right before it (steps over all worlds, seconds).
    Returns ``{efficiency, rounds: [{env_control_steps_per_s, physics_steps_per_s, efficiency}]}`` where
    ``efficiency`` is the median of the per-round ratios (robust to a round disturbed by other load).
    """
    if not rounds:
        raise ValueError("interleaved_efficiency needs at least one round")
    out = []
    for env_ms, physics_steps, physics_s in rounds:
        if physics_s <= 0:
            raise ValueError("a physics-limit block took no measurable time")
        env_rate = throughput(num_envs, env_ms)
        physics_rate = physics_steps / physics_s
        out.append(
            {
                "env_control_steps_per_s": env_rate,
                "physics_steps_per_s": physics_rate,
                "efficiency": efficiency(env_rate, physics_rate, decimation),
            }
        )
    return {"efficiency": statistics.median(r["efficiency"] for r in out), "rounds": out}


def counter_delta(
    before: Mapping[str, TransferCount], after: Mapping[str, TransferCount]
) -> dict[str, TransferCount]:
    """``after - before`` of transfer counters ``{"dir/phase": {count, bytes}}`` (keys of either side)."""
    zero = TransferCount(count=0, bytes=0)
    out: dict[str, TransferCount] = {}
    for key in sorted(set(before) | set(after)):
        new, old = after.get(key, zero), before.get(key, zero)
        out[key] = TransferCount(count=new["count"] - old["count"], bytes=new["bytes"] - old["bytes"])
    return out


def transfer_report(
    inventory: Sequence[Mapping[str, Any]], per_iteration: Sequence[Mapping[str, TransferCount]]
) -> dict[str, Any]:
    """Compare measured per-control-step copies with the backend's declared inventory.

    ``per_iteration[i]`` is the counter delta over control step ``i``. Every measured key must be
    declared; each declared entry gets ``measured_max_per_control_step``, ``measured_total_count``,
    ``measured_total_bytes`` and ``within_limit``. ``undeclared`` lists measured keys the inventory does
    not cover (a violation: a copy nobody declared).
    """
    declared: dict[str, dict[str, Any]] = {}
    for item in inventory:
        key = f"{item['direction']}/{item['phase']}"
        if key in declared:
            raise ValueError(f"transfer inventory declares {key} twice")
        declared[key] = dict(item)
    measured_keys: set[str] = set()
    for step in per_iteration:
        measured_keys |= {k for k, v in step.items() if v["count"] or v["bytes"]}
    entries: list[dict[str, Any]] = []
    zero = TransferCount(count=0, bytes=0)
    for key, item in declared.items():
        counts = [step.get(key, zero)["count"] for step in per_iteration]
        sizes = [step.get(key, zero)["bytes"] for step in per_iteration]
        worst = max(counts, default=0)
        entries.append(
            {
                **item,
                "measured_max_per_control_step": worst,
                "measured_total_count": sum(counts),
                "measured_total_bytes": sum(sizes),
                "within_limit": worst <= int(item["max_per_control_step"]),
            }
        )
    undeclared = sorted(measured_keys - set(declared))
    return {
        "control_steps": len(per_iteration),
        "inventory": entries,
        "undeclared": undeclared,
        "within_inventory": not undeclared and all(e["within_limit"] for e in entries),
    }


def profiler_env_violations(environ: Mapping[str, str]) -> list[str]:
    """Names of set profiler/debug variables that acceptance refuses (sorted). Empty values count too:
    several tools act on presence alone."""
    hits = {
        name
        for name in environ
        if name in PROFILER_ENV_EXACT or any(name.startswith(prefix) for prefix in PROFILER_ENV_PREFIXES)
    }
    return sorted(hits)


def idle_verdict(snapshot: Mapping[str, Any], memory_threshold_bytes: int) -> dict[str, Any]:
    """Is every NVML device idle? Idle = NVML available with >= 1 device, no compute process on any
    device, and each device's used memory <= ``memory_threshold_bytes``.

    Returns ``{idle, reasons: [...], devices: [{index, uuid, used_bytes, compute_pids}]}``; ``reasons`` is
    empty iff idle.
    """
    reasons: list[str] = []
    devices: list[dict[str, Any]] = []
    if not snapshot.get("available"):
        reasons.append(f"no NVML evidence: {snapshot.get('reason')}")
    elif not snapshot.get("devices"):
        reasons.append("NVML reports no GPU devices")
    for device in snapshot.get("devices", []):
        pids = sorted({int(p["pid"]) for p in device["processes"] if p["kind"] == "compute"})
        devices.append(
            {
                "index": device["index"],
                "uuid": device["uuid"],
                "used_bytes": device["used_bytes"],
                "compute_pids": pids,
            }
        )
        if pids:
            reasons.append(f"GPU {device['index']} ({device['uuid']}) runs compute processes {pids}")
        if int(device["used_bytes"]) > memory_threshold_bytes:
            reasons.append(
                f"GPU {device['index']} ({device['uuid']}) uses {device['used_bytes']} bytes "
                f"> threshold {memory_threshold_bytes}"
            )
    return {"idle": not reasons, "reasons": reasons, "devices": devices}
