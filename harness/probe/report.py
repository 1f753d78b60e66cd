"""The per-backend block of the probe artifact, built from what one worker measured. Pure: data in, dict out.

The worker (``harness.probe.worker``) records every measured env step as a :class:`StepRecord`, groups
them into the phased loop and the interleaved throughput rounds (:class:`Measurement`) and gathers the
backend's facts (:class:`BackendFacts`); :func:`backend_report` turns those into the schema's
block of one worker process (``backends.<name>.processes[i]`` in foundation/schemas/probe-0.4.0.schema.json),
raw per-round and per-iteration samples included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from soakbench.harness.probe.limit import LimitDescription
from soakbench.harness.probe.spec import WorkerSpec
from soakbench.harness.probe.stats import (
    PROBE_PHASES,
    interleaved_efficiency,
    per_iteration_phase_ms,
    phase_report,
    summarize_ms,
    throughput,
    transfer_report,
)
from soakbench.runtime.backends.contract import (
    BackendDiagnostics,
    DataPlane,
    HostSteppingInfo,
    PhysicsWarnings,
    TransferCount,
    TransferDeclaration,
)


class OwnerFacts(TypedDict):
    """The owner config that was composed: algo, task, sim and its YAML chain."""

    algo: str
    task: str
    sim: str
    chain: list[str]


class TorchFacts(TypedDict):
    """The torch build and thread setting the worker measured with."""

    version: str
    cuda: str | None
    device_name: str | None
    intra_op_threads: int


@dataclass(frozen=True)
class StepRecord:
    """One measured env step, timed between device synchronizations."""

    iteration_ms: float
    phase_ms: Mapping[str, Sequence[float]]  # sections timed during this step, by phase; empty untimed
    transfers: Mapping[str, TransferCount]  # copies counted during this step
    episodes: int  # episodes that ended in this step


@dataclass(frozen=True)
class ThroughputRound:
    """A physics-limit block and the env block right after it (one load, one ratio)."""

    physics_steps: int
    physics_s: float
    env_steps: tuple[StepRecord, ...]


class CpuSpan(TypedDict):
    """Wall time beside CPU time over one kind of section: the whole process (MuJoCo's physics threads
    included) and the stepping thread alone."""

    wall_ms: float
    process_cpu_ms: float
    thread_cpu_ms: float


@dataclass(frozen=True)
class CpuTimes:
    """CPU beside wall time per env phase of the phased loop and per block kind of the rounds."""

    phases: dict[str, CpuSpan]
    physics_limit_blocks: CpuSpan
    throughput_env_blocks: CpuSpan


@dataclass(frozen=True)
class Measurement:
    """Both measured loops of one worker: the phased loop and the interleaved throughput rounds."""

    phased: tuple[StepRecord, ...]
    rounds: tuple[ThroughputRound, ...]
    limit: LimitDescription
    counters_total: dict[str, TransferCount]  # transfer counters over both loops
    cpu: CpuTimes


@dataclass(frozen=True)
class BackendFacts:
    """What the worker knows about the measured backend and its process, besides the timings."""

    pid: int
    parent_pid: int
    owner: OwnerFacts
    device: str
    data_plane: DataPlane
    diagnostic_lane: bool
    num_envs: int
    obs_dim: int
    action_dim: int
    decimation: int
    physics_threads: int | None
    host_stepping: HostSteppingInfo | None
    setup_s: float
    warmup_s: float
    backend_diagnostics: BackendDiagnostics
    physics_warnings: PhysicsWarnings | None
    inventory: tuple[TransferDeclaration, ...]
    torch: TorchFacts


def backend_report(spec: WorkerSpec, facts: BackendFacts, measured: Measurement) -> dict[str, Any]:
    """The artifact block of one backend (plain JSON)."""
    phased_ms = [step.iteration_ms for step in measured.phased]
    plain_ms = [step.iteration_ms for r in measured.rounds for step in r.env_steps]
    interleaved = interleaved_efficiency(
        facts.num_envs,
        facts.decimation,
        [
            ([step.iteration_ms for step in r.env_steps], r.physics_steps, r.physics_s)
            for r in measured.rounds
        ],
    )
    return {
        "backend": spec.backend,
        "pid": facts.pid,
        "parent_pid": facts.parent_pid,
        "owner": dict(facts.owner),
        "device": facts.device,
        "data_plane": facts.data_plane,
        "diagnostic_lane": facts.diagnostic_lane,
        "num_envs": facts.num_envs,
        "obs_dim": facts.obs_dim,
        "action_dim": facts.action_dim,
        "decimation": facts.decimation,
        "physics_threads": facts.physics_threads,
        "host_stepping": facts.host_stepping,
        "warmup_iterations": spec.warmup,
        "measured_iterations": spec.iters,
        "setup_s": facts.setup_s,
        "warmup_s": facts.warmup_s,
        "episodes_finished": sum(step.episodes for step in _all_steps(measured)),
        "phases": phases_block(measured.phased),
        "throughput_env_control_steps_per_s": throughput(facts.num_envs, plain_ms),
        "throughput_phased_env_control_steps_per_s": throughput(facts.num_envs, phased_ms),
        "throughput_iteration_ms": summarize_ms(plain_ms),
        "physics_limit": physics_limit_block(measured, facts.decimation),
        "efficiency": interleaved["efficiency"],
        "rounds": [
            {**rates, **raw_round(r)} for rates, r in zip(interleaved["rounds"], measured.rounds, strict=True)
        ],
        "phase_samples_ms": phase_samples(measured.phased),
        "cpu": asdict(measured.cpu),
        "backend_diagnostics": facts.backend_diagnostics,
        "physics_warnings": facts.physics_warnings,
        "transfers": transfers_block(facts.inventory, measured),
        "torch": dict(facts.torch),
    }


def raw_round(measured: ThroughputRound) -> dict[str, Any]:
    """A round's raw timings: the env block's per-iteration ms and the limit block's steps and seconds."""
    return {
        "iteration_ms": [step.iteration_ms for step in measured.env_steps],
        "physics_steps": measured.physics_steps,
        "physics_s": measured.physics_s,
    }


def phase_samples(phased: Sequence[StepRecord]) -> dict[str, list[float]]:
    """The phased loop's raw per-iteration milliseconds: ``<phase>_ms`` per phase and ``iteration_ms``."""
    per_phase = per_iteration_phase_ms([step.phase_ms for step in phased], PROBE_PHASES)
    return {
        **{f"{phase}_ms": values for phase, values in per_phase.items()},
        "iteration_ms": [step.iteration_ms for step in phased],
    }


def phases_block(phased: Sequence[StepRecord]) -> dict[str, dict[str, Any]]:
    """Per-phase statistics of the phased loop: one value per iteration and phase (0.0 when it did not
    run); ``invocations`` counts the sections actually timed."""
    samples = [step.phase_ms for step in phased]
    invocations = {phase: sum(len(s.get(phase, ())) for s in samples) for phase in PROBE_PHASES}
    per_phase = per_iteration_phase_ms(samples, PROBE_PHASES)
    return phase_report([step.iteration_ms for step in phased], per_phase, invocations)


def physics_limit_block(measured: Measurement, decimation: int) -> dict[str, Any]:
    """The limit's description plus its totals over every limit block."""
    steps = sum(r.physics_steps for r in measured.rounds)
    seconds = sum(r.physics_s for r in measured.rounds)
    return {
        **measured.limit,
        "physics_steps": steps,
        "elapsed_s": seconds,
        "physics_steps_per_s": steps / seconds,
        "control_steps_per_s": steps / seconds / decimation,
    }


def transfers_block(inventory: Sequence[TransferDeclaration], measured: Measurement) -> dict[str, Any]:
    """Counted copies of every measured step (both loops) against the declared inventory.

    ``inventory_declared`` is true when the backend declares at least one copy: a device-plane backend
    declares none and must then count none to stay ``within_inventory``.
    """
    per_step = [step.transfers for step in _all_steps(measured)]
    report = transfer_report([asdict(item) for item in inventory], per_step)
    report["inventory_declared"] = bool(inventory)
    report["counters_total"] = measured.counters_total
    return report


def _all_steps(measured: Measurement) -> list[StepRecord]:
    """Every measured step in the order it ran: the phased loop, then each round's env block."""
    return [*measured.phased, *(step for r in measured.rounds for step in r.env_steps)]
