"""The probe's settings: its request as one frozen record, every flag checked before anything runs.

``validate_settings`` raises ``ProbeInputError`` naming the flag and what is allowed (the CLI exits 2,
nothing written); ``check_preconditions`` checks the host (acceptance rules, CUDA, the config's platform
blockers) the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.harness.probe.stats import profiler_env_violations

if TYPE_CHECKING:
    from soakbench.runtime.config import ComposedConfig

ALGO = "flashsac"
# The trainer's collector steps the env with torch single-threaded (runtime/manager/trainer.py,
# TrainerHooks.collector_torch_threads): intra-op workers fight the physics threads for the cores
# (one tracking step at 64 envs: 41 ms with 2 torch threads vs 1.4 ms with 1 on 2 cores). The probe
# measures what the trainer runs, so it uses the same setting unless told otherwise.
COLLECTOR_TORCH_THREADS = 1
# Interleaved (physics-limit block, env block) rounds of the throughput loop; min(rounds, iters) run.
DEFAULT_ROUNDS = 5
# Independent worker processes per backend, interleaved across backends: process-level effects (memory
# layout, CPU placement, a load spike) show up as spread between processes instead of hiding in one.
DEFAULT_PROCESSES = 3


class ProbeInputError(Exception):
    """Bad arguments or an unmet precondition: exit 2, nothing written."""


class ProbeFailure(Exception):
    """A worker failed: exit 1, nothing written."""


@dataclass(frozen=True)
class ProbeSettings:
    """Validated probe request (see ``validate_settings``)."""

    backends: tuple[str, ...]
    task: str
    num_envs: int
    warmup: int
    iters: int
    seed: int
    mjwarp_device: str
    physics_threads: int | None
    torch_threads: int
    rounds: int
    processes: int
    test_step_sleep_ms: float
    acceptance: bool
    idle_memory_threshold_bytes: int
    idle_wait_s: float
    worker_timeout_s: float
    output: Path


# Probe flags that are config settings: their bounds are the config's own (runtime.config.sections).
CONFIG_FLAGS: dict[str, str] = {
    "algo.num_envs": "--num-envs",
    "seed": "--seed",
    "training.mjwarp_device": "--mjwarp-device",
    "training.physics_threads": "--physics-threads",
}


def validate_settings(  # noqa: PLR0913 — one parameter per probe flag, each passed by name
    *,
    backends: str,
    task: str,
    num_envs: int,
    warmup: int,
    iters: int,
    seed: int,
    mjwarp_device: str | None,
    physics_threads: int | None,
    acceptance: bool,
    idle_memory_threshold_mib: int,
    idle_wait_s: float,
    worker_timeout_s: float,
    output: str,
    torch_threads: int = COLLECTOR_TORCH_THREADS,
    rounds: int = DEFAULT_ROUNDS,
    processes: int = DEFAULT_PROCESSES,
    test_step_sleep_ms: float = 0.0,
) -> ProbeSettings:
    """Check every argument (and the output location) before anything runs; raise ProbeInputError."""
    from soakbench.runtime.tasks import TASKS

    names = _backend_names(backends)
    if task not in TASKS:
        raise ProbeInputError(f"--task {task!r} is not registered; allowed: {sorted(TASKS)}")
    if mjwarp_device is not None and "mjwarp" not in names:
        raise ProbeInputError("--mjwarp-device is only meaningful when --backends includes mjwarp")
    for flag, value, least in (
        ("--warmup", warmup, 0),
        ("--iters", iters, 1),
        ("--rounds", rounds, 1),
        ("--processes", processes, 1),
    ):
        if value < least:
            raise ProbeInputError(f"{flag} must be >= {least}, got {value}")
    if torch_threads < 1:
        raise ProbeInputError(f"--torch-threads must be >= 1, got {torch_threads}")
    if not 0 <= test_step_sleep_ms < float("inf"):
        raise ProbeInputError(f"--test-step-sleep-ms must be a finite number >= 0, got {test_step_sleep_ms}")
    if idle_memory_threshold_mib < 0 or idle_wait_s < 0 or worker_timeout_s <= 0:
        raise ProbeInputError(
            "--idle-memory-threshold-mib and --idle-wait-s must be >= 0, --worker-timeout-s > 0"
        )
    settings = ProbeSettings(
        backends=names,
        task=task,
        num_envs=num_envs,
        warmup=warmup,
        iters=iters,
        seed=seed,
        mjwarp_device=mjwarp_device or "cuda",
        physics_threads=physics_threads,
        torch_threads=torch_threads,
        rounds=rounds,
        processes=processes,
        test_step_sleep_ms=test_step_sleep_ms,
        acceptance=acceptance,
        idle_memory_threshold_bytes=idle_memory_threshold_mib << 20,
        idle_wait_s=idle_wait_s,
        worker_timeout_s=worker_timeout_s,
        output=_output_path(output),
    )
    for backend in names:
        compose_for(settings, backend)  # the flags that are settings are checked by the config
    return settings


def _backend_names(backends: str) -> tuple[str, ...]:
    from soakbench.runtime.backends import BACKENDS

    names = tuple(b.strip() for b in backends.split(",") if b.strip())
    if not names:
        raise ProbeInputError(f"--backends is empty; allowed: comma-separated from {sorted(BACKENDS)}")
    unknown = [b for b in names if b not in BACKENDS]
    if unknown:
        raise ProbeInputError(f"--backends: unknown {unknown}; allowed: {sorted(BACKENDS)}")
    if len(set(names)) != len(names):
        raise ProbeInputError(f"--backends lists a backend twice: {list(names)}")
    return names


def _output_path(output: str) -> Path:
    out = Path(output)
    if not out.is_absolute():
        raise ProbeInputError(f"--output must be an absolute path, got {output!r}")
    if out.suffix != ".json":
        raise ProbeInputError(f"--output must name a .json file, got {output!r}")
    if out.is_dir():
        raise ProbeInputError(f"--output {output} is a directory; name a .json file")
    if not out.parent.is_dir():
        raise ProbeInputError(f"--output parent directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise ProbeInputError(f"--output parent directory {out.parent} is not writable")
    return out


def compose_for(settings: ProbeSettings, backend: str) -> ComposedConfig:
    """The owner config ``backend``'s worker will compose; ProbeInputError names the probe flag (or the
    backend) behind a ConfigError."""
    from soakbench.runtime.config import ConfigError, compose

    try:
        return compose(ALGO, settings.task, backend, config_overrides(settings, backend))
    except ConfigError as exc:
        flag = CONFIG_FLAGS.get(exc.key or "")
        raise ProbeInputError(f"{flag}: {exc}" if flag else f"{backend}: {exc}") from exc


def check_preconditions(
    settings: ProbeSettings,
    environ: Mapping[str, str],
    nvml_snapshot: Callable[[], dict[str, Any]],
    platform_facts: Callable[[], Any],
) -> None:
    """Host prerequisites, acceptance rules first; raise ProbeInputError naming the first unmet one."""
    from soakbench.runtime.config import platform_blockers

    if settings.acceptance:
        hits = profiler_env_violations(environ)
        if hits:
            raise ProbeInputError(
                f"--acceptance refuses profiler/debug environment variables: {hits}; unset them "
                "(they change what is measured)"
            )
        if settings.mjwarp_device == "cpu" and "mjwarp" in settings.backends:
            raise ProbeInputError(
                "--acceptance measures the production CUDA lane; --mjwarp-device cpu is a diagnostic lane"
            )
        snap = nvml_snapshot()
        if not snap["available"]:
            raise ProbeInputError(
                f"--acceptance needs NVML evidence of an idle GPU and this host has none: {snap['reason']}"
            )
    facts = platform_facts()
    for backend in settings.backends:
        if backend == "mjwarp" and settings.mjwarp_device == "cuda" and not facts.cuda_available:
            raise ProbeInputError(
                "--backends mjwarp needs a CUDA device and none is available; to measure MJWarp on Warp's "
                "CPU device (diagnostic lane, never production evidence) pass --mjwarp-device cpu"
            )
        problems = platform_blockers(compose_for(settings, backend), facts)
        if problems:
            raise ProbeInputError(f"{backend}: {problems[0]}")


def config_overrides(settings: ProbeSettings, backend: str) -> list[str]:
    """Dotted overrides of the owner config for ``backend`` (checked here, composed again by the worker)."""
    items = [f"algo.num_envs={settings.num_envs}", f"seed={settings.seed}"]
    if backend == "mjwarp":
        items.append(f"training.mjwarp_device={settings.mjwarp_device}")
    if settings.physics_threads is not None:
        items.append(f"training.physics_threads={settings.physics_threads}")
    return items
