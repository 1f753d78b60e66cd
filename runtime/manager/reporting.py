"""What the trainer reports, built from explicit inputs: progress records, TensorBoard scalars, the runtime
manifest and the run summary.

Every function here is pure: it reads the snapshots and facts it is given and returns plain data. The
session gathers the inputs and does all the writing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from soakbench.foundation.vocab import RunPhase
from soakbench.runtime.artifacts import MANIFEST_SCHEMA_VERSION
from soakbench.runtime.manager.control import ControlStats
from soakbench.runtime.manager.hooks import TrainerHooks
from soakbench.runtime.manager.plan import RunPlan
from soakbench.runtime.manager.resources import ArenaStats, Hello
from soakbench.runtime.manager.shutdown import ShutdownRecord
from soakbench.runtime.manager.telemetry import CounterSnapshot, EpisodeTotals, TbWindow

REPLAY_KEYS = (
    "published_sequence",
    "release_sequence",
    "high_water_occupancy",
    "backpressure_waits",
    "backpressure_wait_s",
    "early_returns",
    "dropped_batches",
    "closed_returns",
    "stop_returns",
)
INFERENCE_KEYS = (
    "queue_depth",
    "publication_lag",
    "max_in_flight",
    "max_publication_lag",
    "events",
    "published_version",
    "consumed_version",
)
# progress.jsonl speaks the soak monitor's phase vocabulary, which has no startup/playback/cleanup.
PROGRESS_PHASE = {"startup": "prefill", "playback": "finalize", "cleanup": "finalize"}


# -- progress and TensorBoard --------------------------------------------------------------------
def progress_record(
    snap: CounterSnapshot,
    stats: ArenaStats,
    phase: RunPhase,
    elapsed_s: float,
    env_steps_per_s: float,
    final: bool,
) -> dict[str, Any]:
    """One progress.jsonl object (without ``schema``/``time``, added by ProgressLog)."""
    replay, ring = stats.replay, stats.inference
    record: dict[str, Any] = {
        "elapsed_s": round(elapsed_s, 6),
        "iteration": snap.iterations,
        "total_env_steps": snap.total_env_steps,
        "env_steps_per_s": round(env_steps_per_s, 3),
        "learner_updates": snap.learner_updates,
        "phase": PROGRESS_PHASE.get(phase, phase),
        "replay": _pick(replay, REPLAY_KEYS) | {"occupancy": replay["final_occupancy"]},
        "inference": _pick(ring, INFERENCE_KEYS),
    }
    if final:
        record["final"] = True
    return record


def _pick(source: Mapping[str, object], keys: Iterable[str]) -> dict[str, object]:
    return {k: source[k] for k in keys}


def episode_totals(control: ControlStats | None) -> EpisodeTotals | None:
    """The collector's finished-episode totals from the control segment (None: no segment)."""
    if control is None:
        return None
    return EpisodeTotals(control["episodes"], control["episode_return_sum"], control["episode_length_sum"])


def tb_scalars(
    snap: CounterSnapshot, window: TbWindow, learner_metrics: Mapping[str, float], stats: ArenaStats
) -> dict[str, float]:
    """One schema-v1 window: the latest learner metrics, window rates, episodes and counters."""
    scalars = {k: float(v) for k, v in learner_metrics.items()}
    scalars.update(_throughput_scalars(snap, window))
    scalars.update(_arena_scalars(stats))
    if window.episodes is not None:
        scalars.update(_episode_scalars(window.episodes))
    return scalars


def _throughput_scalars(snap: CounterSnapshot, window: TbWindow) -> dict[str, float]:
    return {
        "learner/updates_total": snap.learner_updates,
        "learner/updates_per_s": window.learner_updates / window.seconds,
        "learner/ingress_wait_share": min(1.0, window.learner_wait_s / window.seconds),
        "throughput/env_steps_per_s": window.env_steps / window.seconds,
        "throughput/total_env_steps": snap.total_env_steps,
        "throughput/iteration": snap.iterations,
    }


def _arena_scalars(stats: ArenaStats) -> dict[str, float]:
    replay, ring = stats.replay, stats.inference
    return {
        "replay/occupancy": replay["final_occupancy"],
        "replay/high_water_occupancy": replay["high_water_occupancy"],
        "replay/published_sequence": replay["published_sequence"],
        "replay/release_sequence": replay["release_sequence"],
        "replay/backpressure_waits": replay["backpressure_waits"],
        "replay/backpressure_wait_s": replay["backpressure_wait_s"],
        "replay/dropped_batches": replay["dropped_batches"],
        "replay/early_returns": replay["early_returns"],
        "inference/queue_depth": ring["queue_depth"],
        "inference/publication_lag": ring["publication_lag"],
        "inference/max_in_flight": ring["max_in_flight"],
        "inference/max_publication_lag": ring["max_publication_lag"],
        "inference/events": ring["events"],
        "inference/published_version": ring["published_version"],
        "inference/consumed_version": ring["consumed_version"],
    }


def _episode_scalars(new: EpisodeTotals) -> dict[str, float]:
    """Means over the episodes that finished in the window (none: only the zero count)."""
    scalars: dict[str, float] = {"episode/count": new.count}
    if new.count > 0:
        scalars["episode/reward_mean"] = new.return_sum / new.count
        scalars["episode/length_mean"] = new.length_sum / new.count
    return scalars


# -- summary + manifest --------------------------------------------------------------------------
@dataclass(frozen=True)
class RunReport:
    """Everything the run summary and the runtime manifest are built from.

    ``hello`` is None when the collector never finished start-up; ``cuda_process_sharing`` is the
    block from :func:`cuda_process_sharing`; ``memory_budgeted`` says the arenas were created.
    """

    plan: RunPlan
    hooks: TrainerHooks
    counters: CounterSnapshot
    stats: ArenaStats
    hello: Hello | None
    memory_budgeted: bool
    learner_diagnostics: dict[str, Any]
    signalling_kind: str
    cuda_process_sharing: dict[str, Any]
    collector_pid: int | None
    collector_exitcode: int | None
    loop_s: float
    playback: dict[str, Any] | None
    started_unix_s: float
    finished_unix_s: float
    duration_s: float
    exit_code: int


def cuda_process_sharing(
    resolved: Mapping[str, Any] | None,
    configured: str | None,
    plan: RunPlan,
    ambient: dict[str, Any] | None,
) -> dict[str, Any]:
    """Configured/effective sharing and the devices; on CUDA also ``ambient`` (the MPS facts the session
    observed, or the error observing them), elsewhere a note that sharing does not apply."""
    block = dict(resolved) if resolved is not None else {}
    block.setdefault("configured", configured)
    block.setdefault("effective", None)
    block["learner_device"] = plan.learner_device
    block["collector_device"] = plan.physics_device
    if on_cuda(plan):
        if block["effective"] is None:
            block["effective"] = "none"
        block["ambient"] = ambient
    else:
        block["ambient"] = None
        block["note"] = "learner and collector are not on CUDA; process sharing does not apply"
    return block


def on_cuda(plan: RunPlan) -> bool:
    return "cuda" in (plan.learner_device, plan.physics_device)


def manifest(report: RunReport, record: ShutdownRecord) -> dict[str, Any]:
    """The runtime manifest (foundation/schemas/runtime-manifest-1)."""
    replay = report.stats.replay
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "limits": _limits(report.plan, report.hooks),
        "devices": _devices(report.plan, report.hello),
        "signalling": {"kind": report.signalling_kind},
        "inference_flight": _inference_flight(report.stats),
        "replay_ingress": _pick(replay, (*REPLAY_KEYS, "depth", "slot_rows", "final_occupancy"))
        | {"learner_wait_s": round(report.counters.learner_wait_s, 6)},
        "memory_budget": _memory_budget(report.plan, report.hello) if report.memory_budgeted else None,
        "backend_diagnostics": _backend_diagnostics(report),
        "learner_diagnostics": report.learner_diagnostics,
        "cuda_process_sharing": report.cuda_process_sharing,
        "collector": {"pid": report.collector_pid, "exitcode": report.collector_exitcode}
        | collector_timing(report.stats.control),
        "shutdown": record.manifest_block(),
    }


def _limits(plan: RunPlan, hooks: TrainerHooks) -> dict[str, Any]:
    return {
        "num_envs": plan.num_envs,
        "max_iterations": plan.total_iterations,
        "prefill_iterations": plan.prefill,
        "replay_ingress_depth": plan.ingress_depth,
        "replay_ingress_slot_rows": plan.slot_rows,
        "slots_per_iteration": plan.slots_per_iteration,
        "inference_slot_capacity": plan.ring_capacity,
        "collector_metrics_interval": plan.metrics_interval,
        "heartbeat_seconds": plan.heartbeat_s,
        "startup_timeout_s": hooks.startup_timeout_s,
        "stale_tick_timeout_s": hooks.stale_tick_timeout_s,
        "shutdown_deadline_s": hooks.shutdown_deadline_s,
    }


def _devices(plan: RunPlan, hello: Hello | None) -> dict[str, Any]:
    return {
        "learner": plan.learner_device,
        "collector": hello.device if hello is not None else plan.physics_device,
        "backend_type": hello.backend_type if hello is not None else plan.sim_backend,
        "data_plane": hello.data_plane if hello is not None else None,
        "arena": "cuda_ipc" if plan.physics_device.startswith("cuda") else "posix_shm",
    }


def _inference_flight(stats: ArenaStats) -> dict[str, Any]:
    ring = stats.inference
    return {
        "final_queue_depth": ring["queue_depth"],
        "final_publication_lag": ring["publication_lag"],
        "max_in_flight": ring["max_in_flight"],
        "max_publication_lag": ring["max_publication_lag"],
        "events": ring["events"],
        "slot_capacity": ring["slot_capacity"],
        "published_version": ring["published_version"],
        "consumed_version": ring["consumed_version"],
        "torn_reads": ring["torn_reads"],
    }


def _memory_budget(plan: RunPlan, hello: Hello | None) -> dict[str, Any] | None:
    if hello is None:
        return None
    layout_width = 2 * hello.obs_dim + hello.action_dim + 2
    return {
        "ingress_bytes": 4 * plan.ingress_depth * plan.slot_rows * layout_width,
        "ring_bytes": 4 * plan.ring_capacity * hello.actor_state_size,
        "device": plan.physics_device,
        "decision": "ingress and ring sized exactly from depth x slot_rows and slot capacity x actor state",
    }


def _backend_diagnostics(report: RunReport) -> dict[str, Any]:
    if report.hello is not None:
        return report.hello.backend_diagnostics
    return {
        "available": False,
        "backend_type": report.plan.sim_backend,
        "unavailable_reason": "the collector never reported diagnostics (it did not finish start-up)",
    }


def collector_timing(control: ControlStats | None) -> dict[str, Any]:
    """Seconds the collector spent in inference, env stepping and ingress publication (incl. waits)."""
    if control is None:
        return {"iterations": 0, "inference_s": 0.0, "env_step_s": 0.0, "publish_s": 0.0}
    return {
        "iterations": control["iterations"],
        "inference_s": round(control["inference_s"], 6),
        "env_step_s": round(control["env_step_s"], 6),
        "publish_s": round(control["publish_s"], 6),
    }


def build_summary(report: RunReport, record: ShutdownRecord) -> dict[str, Any]:
    """The run_summary.json document (foundation/schemas/run-summary-1)."""
    snap = report.counters
    loop_s = max(report.loop_s, 1e-9)
    timed = report.loop_s > 0
    completed = record.classification == "normal_completion"
    return {
        "metric_schema_version": 1,
        "status": record.status,
        "failure_reason": None if completed else (record.reason or record.classification),
        "failure_classification": None if completed else record.classification,
        "total_env_steps": snap.total_env_steps,
        "iterations": snap.iterations,
        "learner_updates": snap.learner_updates,
        "duration_s": round(report.duration_s, 6),
        "env_steps_per_s": round(snap.total_env_steps / loop_s, 3) if timed else 0.0,
        "learner_updates_per_s": round(snap.learner_updates / loop_s, 3) if timed else 0.0,
        "started_unix_s": report.started_unix_s,
        "finished_unix_s": report.finished_unix_s,
        "exit_code": report.exit_code,
        "playback": report.playback,
        "runtime_manifest": manifest(report, record),
    }


def schema_failure_summary(summary: Mapping[str, Any], message: str) -> dict[str, Any]:
    """Replace an invalid summary's verdict with an explicit failure that still validates."""
    out = dict(summary)
    out["status"] = "failed"
    out["failure_classification"] = "unknown_failure"
    out["failure_reason"] = f"run summary failed its own schema: {message}"
    shutdown = dict(out["runtime_manifest"]["shutdown"])
    shutdown.update(classification="unknown_failure", owner="manager")
    out["runtime_manifest"] = dict(out["runtime_manifest"], shutdown=shutdown)
    out["exit_code"] = 1
    return out
