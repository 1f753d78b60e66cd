"""What the trainer reports: progress records, TensorBoard windows, the run summary + runtime manifest,
failure translation from collector reports, device placement, and the post-training playback.

Functions here read a :class:`~runtime.manager.trainer.TrainingSession` and return plain data; the
session decides when to write.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from runtime.artifacts import MANIFEST_SCHEMA_VERSION
from runtime.manager.shutdown import RunFailure, ShutdownRecord

if TYPE_CHECKING:
    from runtime.manager.trainer import TrainingSession

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
PROGRESS_PHASE = {"startup": "prefill", "playback": "finalize", "cleanup": "finalize"}


# -- placement -----------------------------------------------------------------------------------
def learner_device(cfg: DictConfig) -> str:
    """``resolved.learner_device`` from config validation, else the auto order cuda, mps, cpu."""
    resolved = cfg.get("resolved", {}) or {}
    wanted = str(resolved.get("learner_device") or cfg.training.learner_device)
    if wanted != "auto":
        return wanted
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def collector_device(cfg: DictConfig) -> str:
    """The env/actor device of the collector: MJWarp's configured device, else CPU (host bridge)."""
    if cfg.training.sim_backend == "mjwarp":
        return "cuda" if cfg.training.mjwarp_device == "cuda" else "cpu"
    return "cpu"


# -- failures ------------------------------------------------------------------------------------
def failure_from_report(msg: dict[str, Any]) -> RunFailure:
    """Translate a collector ``error`` report into a classified failure."""
    owner = msg.get("owner")
    classification = "backend_worker_failure" if owner == "backend_worker" else "collector_failure"
    where = "backend worker (env/backend)" if owner == "backend_worker" else "collector"
    return RunFailure(
        classification,  # type: ignore[arg-type]
        f"{where} raised {msg.get('type')}: {msg.get('message')}",
        exc_type=str(msg.get("type")),
    )


def describe_exitcode(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


# -- live counters -------------------------------------------------------------------------------
def _replay(s: TrainingSession) -> dict[str, Any]:
    stats = s.final_ingress
    if stats is None and s.ingress is not None and not s.ingress._closed_local:
        stats = s.ingress.stats()
    if stats is None:
        stats = {k: 0 for k in REPLAY_KEYS} | {
            "depth": int(s.cfg.training.replay_ingress_depth),
            "slot_rows": s.slot_rows,
            "final_occupancy": 0,
            "backpressure_wait_s": 0.0,
        }
    return stats


def _ring(s: TrainingSession) -> dict[str, Any]:
    stats = s.final_ring
    if stats is None and s.ring is not None and not s.ring._closed:
        stats = s.ring.stats()
    if stats is None:
        stats = {k: 0 for k in INFERENCE_KEYS} | {
            "slot_capacity": int(s.cfg.training.inference_slot_capacity)
        }
    return stats


def _rate(s: TrainingSession, steps: int) -> float:
    """Env steps/s since the previous call (the heartbeat window)."""
    now = time.monotonic()
    last_t, last_steps = getattr(s, "_rate_mark", (None, 0))
    s._rate_mark = (now, steps)  # type: ignore[attr-defined]
    if last_t is None or now <= last_t:
        return 0.0
    return (steps - last_steps) / (now - last_t)


def progress_record(s: TrainingSession, final: bool = False) -> dict[str, Any]:
    """One progress.jsonl object (without ``schema``/``time``, added by ProgressLog)."""
    steps = s.c.iterations * s.num_envs
    replay = _replay(s)
    ring = _ring(s)
    record: dict[str, Any] = {
        "elapsed_s": round(time.monotonic() - s.started_mono, 6),
        "iteration": s.c.iterations,
        "total_env_steps": steps,
        "env_steps_per_s": round(_rate(s, steps), 3),
        "learner_updates": s.c.learner_updates,
        "phase": PROGRESS_PHASE.get(s.phase, s.phase),
        "replay": {k: replay[k] for k in REPLAY_KEYS} | {"occupancy": replay["final_occupancy"]},
        "inference": {k: ring[k] for k in INFERENCE_KEYS},
    }
    if final:
        record["final"] = True
    if s.hooks.extra_progress is not None:
        record.update(s.hooks.extra_progress())
    return record


# -- TensorBoard ---------------------------------------------------------------------------------
def open_metrics_writer(log_dir: Path) -> Any:
    from runtime.metrics_schema import MetricsWriter

    return MetricsWriter(log_dir)


def write_tb(s: TrainingSession) -> None:
    """One schema-v1 window at step total_env_steps: learner metrics + episodes + counters."""
    steps = s.c.iterations * s.num_envs
    replay, ring = _replay(s), _ring(s)
    now = time.monotonic()
    last_t, last_updates, last_steps, last_wait = getattr(s, "_tb_mark", (s.started_mono, 0, 0, 0.0))
    window = max(now - last_t, 1e-9)
    s._tb_mark = (now, s.c.learner_updates, steps, s.c.learner_wait_s)  # type: ignore[attr-defined]
    scalars: dict[str, float] = {k: float(v) for k, v in s.c.metrics.items()}
    scalars.update(
        {
            "learner/updates_total": s.c.learner_updates,
            "learner/updates_per_s": (s.c.learner_updates - last_updates) / window,
            "learner/ingress_wait_share": min(1.0, (s.c.learner_wait_s - last_wait) / window),
            "throughput/env_steps_per_s": (steps - last_steps) / window,
            "throughput/total_env_steps": steps,
            "throughput/iteration": s.c.iterations,
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
    )
    control = s.control
    if control is not None and not control.segment._closed:
        episodes = control.get("episodes")
        ret_sum, len_sum = control.getf("episode_return_sum"), control.getf("episode_length_sum")
        n = episodes - s.c.episodes_seen
        if n > 0:
            scalars["episode/reward_mean"] = (ret_sum - s.c.return_sum_seen) / n
            scalars["episode/length_mean"] = (len_sum - s.c.length_sum_seen) / n
        scalars["episode/count"] = n
        s.c.episodes_seen, s.c.return_sum_seen, s.c.length_sum_seen = episodes, ret_sum, len_sum
    s.writer.write(steps, scalars)


# -- summary + manifest --------------------------------------------------------------------------
def cuda_process_sharing(s: TrainingSession) -> dict[str, Any]:
    """Configured/effective sharing; on CUDA also the ambient MPS facts (never fails the run)."""
    resolved = (s.cfg.get("resolved", {}) or {}).get("cuda_process_sharing")
    block: dict[str, Any] = (
        dict(OmegaConf.to_container(resolved)) if resolved is not None else {}  # type: ignore[arg-type]
    )
    block.setdefault("configured", s.cfg.training.cuda_process_sharing)
    block.setdefault("effective", None)
    block["learner_device"] = s.learner_device
    block["collector_device"] = s.collector_device
    on_cuda = "cuda" in (s.learner_device, s.collector_device)
    if on_cuda:
        if block["effective"] is None:
            block["effective"] = "none"
        try:
            from foundation.mps import ambient_facts

            block["ambient"] = ambient_facts(os.environ)
        except Exception as exc:  # ambient observation never fails the run
            block["ambient"] = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        block["ambient"] = None
        block["note"] = "learner and collector are not on CUDA; process sharing does not apply"
    return block


def manifest(s: TrainingSession, record: ShutdownRecord) -> dict[str, Any]:
    replay, ring = _replay(s), _ring(s)
    hello = s.hello or {}
    diagnostics = hello.get("backend_diagnostics") or {
        "available": False,
        "backend_type": s.cfg.training.sim_backend,
        "unavailable_reason": "the collector never reported diagnostics (it did not finish start-up)",
    }
    budget = None
    if s.hello is not None and s.ingress is not None:
        lay = s.ingress.layout
        budget = {
            "ingress_bytes": 4 * lay.depth * lay.slot_rows * lay.width,
            "ring_bytes": 4 * int(s.cfg.training.inference_slot_capacity) * int(hello["actor_state_size"]),
            "device": s.collector_device,
            "decision": "ingress and ring sized exactly from depth x slot_rows and slot capacity x actor state",
        }
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "limits": {
            "num_envs": s.num_envs,
            "max_iterations": s.total_iterations,
            "prefill_iterations": s.prefill,
            "replay_ingress_depth": int(s.cfg.training.replay_ingress_depth),
            "replay_ingress_slot_rows": s.slot_rows,
            "slots_per_iteration": s.slots_per_iteration,
            "inference_slot_capacity": int(s.cfg.training.inference_slot_capacity),
            "collector_metrics_interval": int(s.cfg.training.collector_metrics_interval),
            "heartbeat_seconds": float(s.cfg.training.heartbeat_seconds),
            "startup_timeout_s": s.hooks.startup_timeout_s,
            "stale_tick_timeout_s": s.hooks.stale_tick_timeout_s,
            "shutdown_deadline_s": s.hooks.shutdown_deadline_s,
        },
        "devices": {
            "learner": s.learner_device,
            "collector": hello.get("device", s.collector_device),
            "backend_type": str(hello.get("backend_type", s.cfg.training.sim_backend)),
            "data_plane": hello.get("data_plane"),
            "arena": "cuda_ipc" if s.collector_device.startswith("cuda") else "posix_shm",
        },
        "signalling": {"kind": s.to_learner.kind},
        "inference_flight": {
            "final_queue_depth": ring["queue_depth"],
            "final_publication_lag": ring["publication_lag"],
            "max_in_flight": ring["max_in_flight"],
            "max_publication_lag": ring["max_publication_lag"],
            "events": ring["events"],
            "slot_capacity": ring["slot_capacity"],
            "published_version": ring["published_version"],
            "consumed_version": ring["consumed_version"],
            "torn_reads": ring.get("torn_reads", 0),
        },
        "replay_ingress": {k: replay[k] for k in (*REPLAY_KEYS, "depth", "slot_rows", "final_occupancy")}
        | {"learner_wait_s": round(s.c.learner_wait_s, 6)},
        "memory_budget": budget,
        "backend_diagnostics": diagnostics,
        "cuda_process_sharing": cuda_process_sharing(s),
        "collector": {"pid": s.collector_pid, "exitcode": s.collector_exitcode} | _collector_timing(s),
        "shutdown": record.manifest_block(),
    }


def _collector_timing(s: TrainingSession) -> dict[str, Any]:
    """Seconds the collector spent in inference, env stepping and ingress publication (incl. waits)."""
    c = s.final_control or {}
    return {
        "iterations": int(c.get("iterations", 0)),
        "inference_s": round(float(c.get("inference_s", 0.0)), 6),
        "env_step_s": round(float(c.get("env_step_s", 0.0)), 6),
        "publish_s": round(float(c.get("publish_s", 0.0)), 6),
    }


def build_summary(
    s: TrainingSession, record: ShutdownRecord, started_wall: float, duration_s: float, exit_code: int
) -> dict[str, Any]:
    steps = s.c.iterations * s.num_envs
    loop_s = max(s.loop_s, 1e-9)
    completed = record.classification == "normal_completion"
    return {
        "metric_schema_version": 1,
        "status": record.status,
        "failure_reason": None if completed else (record.reason or record.classification),
        "failure_classification": None if completed else record.classification,
        "total_env_steps": steps,
        "iterations": s.c.iterations,
        "learner_updates": s.c.learner_updates,
        "duration_s": round(duration_s, 6),
        "env_steps_per_s": round(steps / loop_s, 3) if s.loop_s > 0 else 0.0,
        "learner_updates_per_s": round(s.c.learner_updates / loop_s, 3) if s.loop_s > 0 else 0.0,
        "started_unix_s": started_wall,
        "finished_unix_s": time.time(),
        "exit_code": exit_code,
        "playback": s.playback,
        "runtime_manifest": manifest(s, record),
    }


def schema_failure_summary(summary: dict[str, Any], message: str) -> dict[str, Any]:
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


# -- playback ------------------------------------------------------------------------------------
def run_playback(cfg: DictConfig, learner: Any, env_factory: str) -> dict[str, Any]:
    """Deterministic playback of the final actor on one env for ``training.playback_steps`` steps."""
    import torch

    from runtime.manager.collector import resolve

    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    data["algo"]["num_envs"] = 1
    data["resolved"]["replay_ingress_slot_rows"] = 1
    one = OmegaConf.create(data)
    OmegaConf.set_readonly(one, True)
    device = torch.device(collector_device(cfg))
    try:
        env = resolve(env_factory)(one, device=device, seed=int(cfg.seed) + 1)
        obs = env.reset()
    except Exception as exc:
        raise RunFailure("backend_worker_failure", f"playback env failed: {exc}", cause=exc) from exc
    actor = learner.actor
    actor_device = next(iter(actor.parameters()), torch.zeros(())).device
    total, returns = 0.0, list[float]()
    steps = int(cfg.training.playback_steps)
    try:
        for _ in range(steps):
            try:
                with torch.inference_mode():
                    action = actor.act(obs.to(actor_device), deterministic=True).to(device)
            except Exception as exc:
                raise RunFailure("learner_failure", f"playback actor failed: {exc}", cause=exc) from exc
            try:
                out = env.step(action)
            except Exception as exc:
                raise RunFailure("backend_worker_failure", f"playback step failed: {exc}", cause=exc) from exc
            total += float(out.reward.sum())
            returns.extend(float(r) for r in out.episode_returns.reshape(-1))
            obs = out.obs
    finally:
        env.close()
    return {
        "steps": steps,
        "total_reward": total,
        "episodes_completed": len(returns),
        "mean_episode_return": sum(returns) / len(returns) if returns else None,
    }
