"""One isolated backend measurement of the phase probe (run as ``python -m harness.probe.worker SPEC OUT``).

The parent (``harness.probe.cli``) starts one such process per backend and reads its result JSON. Here:
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

The steps are small functions over typed values: :func:`parse_spec` (the request), :func:`_compose_for`
(the config), :class:`StepDriver` (the env loop), :func:`run_rounds` (limit/env rounds) and the pure
:func:`harness.probe.report.backend_report` (the artifact block).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.inputs import INPUTS_DIR, write_own_inputs
from soakbench.harness.inputs import project_root
from soakbench.harness.probe.limit import MjwarpLimit, MujocoRolloutLimit, PhysicsLimit
from soakbench.harness.probe.report import (
    BackendFacts,
    CpuSpan,
    CpuTimes,
    Measurement,
    OwnerFacts,
    StepRecord,
    ThroughputRound,
    TorchFacts,
    backend_report,
)
from soakbench.harness.probe.spec import SpecError, WorkerSpec, parse_spec
from soakbench.harness.probe.stats import counter_delta, split_blocks
from soakbench.runtime.backends.contract import diagnostics_payload
from soakbench.runtime.config import ConfigError, compose
from soakbench.runtime.env import make_env
from soakbench.runtime.timing import PHASES, PhaseTimer, device_sync

if TYPE_CHECKING:
    from soakbench.runtime.backends.base import SimBackend
    from soakbench.runtime.config import ComposedConfig
    from soakbench.runtime.tasks.base import TaskEnv

USAGE = "usage: python -m harness.probe.worker SPEC_JSON OUT_JSON"


@dataclass(frozen=True)
class ComposedRun:
    """The composed owner config of one backend and the values the probe reads from it."""

    cfg: ComposedConfig
    owner: OwnerFacts


def _compose_for(spec: WorkerSpec) -> ComposedRun:
    """Compose the owner config the launcher's precondition check composed (same overrides)."""
    cfg = compose(spec.algo, spec.task, spec.backend, list(spec.overrides))
    owner = OwnerFacts(
        algo=cfg.owner.algo, task=cfg.owner.task, sim=cfg.owner.sim, chain=list(cfg.owner.chain)
    )
    return ComposedRun(cfg=cfg, owner=owner)


class CpuMeter:
    """Accumulates wall, process-CPU and thread-CPU milliseconds per named section."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        wall, process, thread = time.perf_counter(), time.process_time(), time.thread_time()
        try:
            yield
        finally:
            total = self.totals[name]
            total[0] += (time.perf_counter() - wall) * 1e3
            total[1] += (time.process_time() - process) * 1e3
            total[2] += (time.thread_time() - thread) * 1e3

    def report(self, name: str) -> CpuSpan:
        wall, process, thread = self.totals[name]
        return CpuSpan(wall_ms=wall, process_cpu_ms=process, thread_cpu_ms=thread)


class CpuPhaseTimer(PhaseTimer):
    """A PhaseTimer that also charges each phase's CPU time (process and thread) to a :class:`CpuMeter`."""

    def __init__(self, device: torch.device, meter: CpuMeter) -> None:
        super().__init__(device)
        self.meter = meter

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with self.meter.span(name), super().phase(name):
            yield


class StepDriver:
    """Steps one env with seeded uniform actions in [-1, 1], each drawn before its iteration's clock
    starts, and records every step (wall time, phase sections, counted copies, ended episodes).

    ``step_sleep_s`` (test-only, 0 in real probes) sleeps inside every timed step: a known slowdown."""

    def __init__(self, env: TaskEnv, seed: int, step_sleep_s: float = 0.0) -> None:
        self.step_sleep_s = step_sleep_s
        self.env = env
        self.backend: SimBackend = env.backend
        self.device = torch.device(env.device)
        self.sync = device_sync(self.device)
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(seed)

    def actions(self) -> torch.Tensor:
        shape = (self.env.num_envs, self.env.action_dim)
        return torch.rand(shape, generator=self._generator, device=self.device) * 2.0 - 1.0

    def warm_up(self, steps: int) -> float:
        """Reset, then ``steps`` unrecorded steps; returns their wall time in seconds."""
        self.env.reset()
        start = time.perf_counter()
        for _ in range(steps):
            self.env.step(self.actions())
        self.sync()
        return time.perf_counter() - start

    def step(self, timer: PhaseTimer | None) -> StepRecord:
        """One env step, synchronized at both ends (and at every phase boundary with a ``timer``)."""
        act = self.actions()
        before = self.backend.transfer_counters()
        self.sync()
        start = time.perf_counter()
        out = self.env.step(act, timer=timer)
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        self.sync()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        return StepRecord(
            iteration_ms=elapsed_ms,
            phase_ms={} if timer is None else timer.take(),
            transfers=counter_delta(before, self.backend.transfer_counters()),
            episodes=int(out.episode_lengths.numel()),
        )

    def loop(self, count: int, timer: PhaseTimer | None = None) -> tuple[StepRecord, ...]:
        return tuple(self.step(timer) for _ in range(count))


def settle_heap() -> None:
    """Collect the setup's garbage and freeze the survivors (torch, the model, the env) out of later
    collections: a full collection inside a timed step then scans what the loops allocated, not the
    whole heap (with torch loaded an unfrozen one takes 0.1-0.3 s, more than many env steps)."""
    gc.collect()
    gc.freeze()


def run_rounds(
    driver: StepDriver, limit: PhysicsLimit, blocks: list[int], meter: CpuMeter
) -> tuple[ThroughputRound, ...]:
    """Per block: a physics-limit block, then an untimed env block of that many steps."""
    rounds = []
    for block in blocks:
        with meter.span("physics_limit_blocks"):
            steps, seconds = limit.measure(block)
        with meter.span("throughput_env_blocks"):
            env_steps = driver.loop(block)
        rounds.append(ThroughputRound(physics_steps=steps, physics_s=seconds, env_steps=env_steps))
    return tuple(rounds)


def host_threads(spec: WorkerSpec, backend: SimBackend) -> int:
    """The backend's own host physics threads, which the mujoco.rollout limit runs with."""
    info = backend.host_stepping_info()
    if info is None:
        raise ValueError(
            f"backend {spec.backend!r} reports no host_stepping_info; the mujoco.rollout limit needs its "
            "physics thread count"
        )
    return info["num_threads"]


def build_limit(spec: WorkerSpec, driver: StepDriver, steps_per_call: int) -> PhysicsLimit:
    """The physics-limit reference of the backend's model and worlds, from their current states."""
    backend, device = driver.backend, driver.device
    state = backend.public_state()
    qpos = state.qpos.detach().to("cpu", torch.float64).numpy().copy()
    qvel = state.qvel.detach().to("cpu", torch.float64).numpy().copy()
    if spec.backend == "mjwarp":
        warp_device = "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"
        return MjwarpLimit(backend.model, qpos, qvel, warp_device, backend.decimation)
    threads = host_threads(spec, backend)
    return MujocoRolloutLimit(backend.model, qpos, qvel, threads, backend.decimation, steps_per_call)


def measure(spec: WorkerSpec, driver: StepDriver) -> Measurement:
    """The phased loop, then the interleaved rounds against the limit (built from the worlds' states
    after the phased loop). Transfer counters are read between steps, outside the clock."""
    backend = driver.backend
    counters_start = backend.transfer_counters()
    meter = CpuMeter()
    timer = CpuPhaseTimer(driver.device, meter)
    phased = tuple(_metered_step(driver, timer, meter) for _ in range(spec.iters))
    blocks = split_blocks(spec.iters, spec.rounds)
    with build_limit(spec, driver, max(blocks)) as limit:
        rounds = run_rounds(driver, limit, blocks, meter)
        description = limit.describe
    counters_total = counter_delta(counters_start, backend.transfer_counters())
    phases = [name for name in (*PHASES, "iteration") if name in meter.totals]
    cpu = CpuTimes(
        phases={name: meter.report(name) for name in phases},
        physics_limit_blocks=meter.report("physics_limit_blocks"),
        throughput_env_blocks=meter.report("throughput_env_blocks"),
    )
    return Measurement(phased, rounds, description, counters_total, cpu)


def _metered_step(driver: StepDriver, timer: CpuPhaseTimer, meter: CpuMeter) -> StepRecord:
    with meter.span("iteration"):
        return driver.step(timer)


def torch_facts(device: torch.device) -> TorchFacts:
    return TorchFacts(
        version=str(torch.__version__),
        cuda=torch.version.cuda,
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        intra_op_threads=torch.get_num_threads(),
    )


@dataclass(frozen=True)
class SetupTimes:
    """Wall time of env construction (Warp module load/compile included) and of the warm-up steps."""

    setup_s: float
    warmup_s: float


def backend_facts(
    spec: WorkerSpec, composed: ComposedRun, driver: StepDriver, times: SetupTimes, threads: int | None
) -> BackendFacts:
    """The backend's and this process's facts for the artifact, read through the SimBackend contract;
    ``threads`` are the physics-limit's (the backend's own host threads; ``None`` for MJWarp)."""
    env, backend, device = driver.env, driver.backend, driver.device
    return BackendFacts(
        pid=os.getpid(),
        parent_pid=os.getppid(),
        owner=composed.owner,
        device=str(device),
        data_plane=backend.data_plane,
        diagnostic_lane=spec.backend == "mjwarp" and device.type == "cpu",
        num_envs=int(env.num_envs),
        obs_dim=int(env.obs_dim),
        action_dim=int(env.action_dim),
        decimation=int(backend.decimation),
        physics_threads=threads,
        host_stepping=backend.host_stepping_info(),
        setup_s=times.setup_s,
        warmup_s=times.warmup_s,
        backend_diagnostics=diagnostics_payload(backend),
        physics_warnings=backend.physics_warnings(),
        inventory=backend.transfer_inventory(),
        torch=torch_facts(device),
    )


def run_worker(spec: WorkerSpec) -> dict[str, Any]:
    """Measure one backend as ``spec`` describes; returns the per-backend artifact block (plain JSON)."""
    # before any torch work: the collector's intra-op thread count (recorded in the artifact)
    torch.set_num_threads(spec.torch_threads)
    composed = _compose_for(spec)
    start = time.perf_counter()
    env = make_env(composed.cfg, seed=spec.seed)
    setup_s = time.perf_counter() - start
    try:
        driver = StepDriver(env, spec.seed, spec.step_sleep_ms / 1e3)
        times = SetupTimes(setup_s=setup_s, warmup_s=driver.warm_up(spec.warmup))
        settle_heap()
        measured = measure(spec, driver)
        facts = backend_facts(spec, composed, driver, times, measured.limit["threads"])
        return backend_report(spec, facts, measured)
    finally:
        env.close()


def read_spec(path: Path) -> WorkerSpec:
    """Read and validate the spec file; :class:`SpecError` names what is wrong."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise SpecError(f"cannot read the spec {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise SpecError(f"the spec {path} is not valid JSON: {exc}") from exc
    return parse_spec(raw)


def failure_payload(exc: Exception) -> dict[str, Any]:
    """The result file of a failed measurement; config errors are the caller's input (launcher exit 2)."""
    return {
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "message": str(exc),
            "config_error": isinstance(exc, ConfigError),
            "traceback": "".join(traceback.format_exception(exc)),
        },
    }


def main(argv: list[str] | None = None, runner: Callable[[WorkerSpec], dict[str, Any]] = run_worker) -> int:
    """``SPEC_JSON OUT_JSON``: writes ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``
    and exits 0 or 1; a bad command line or spec exits 2 and writes nothing."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        spec = read_spec(Path(args[0]))
    except SpecError as exc:
        print(f"probe_worker: {exc}", file=sys.stderr)
        return 2
    try:
        payload: dict[str, Any] = {"ok": True, "result": runner(spec)}
        code = 0
    except Exception as exc:
        payload, code = failure_payload(exc), 1
    out = Path(args[1])
    if code == 0:  # the launcher merges every worker's record into the artifact's input manifest
        write_own_inputs(out.parent / INPUTS_DIR, f"probe-worker-{spec.backend}", project_root())
    write_atomic(out, json.dumps(payload, indent=2, allow_nan=False))
    return code


if __name__ == "__main__":
    sys.exit(main())
