"""The report builders are pure: snapshots and facts in, plain data out, no session and no process."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from soakbench.runtime.artifacts import RUN_SUMMARY_SCHEMA, RUNTIME_MANIFEST_SCHEMA, validate
from soakbench.runtime.manager import reporting
from soakbench.runtime.manager.control import ControlStats
from soakbench.runtime.manager.diagnostics import learner_diagnostics_payload
from soakbench.runtime.manager.hooks import TrainerHooks
from soakbench.runtime.manager.ingress import empty_replay_stats
from soakbench.runtime.manager.link import describe_exitcode, failure_from_report
from soakbench.runtime.manager.plan import RunPlan
from soakbench.runtime.manager.resources import ArenaStats, Hello
from soakbench.runtime.manager.ring import empty_ring_stats
from soakbench.runtime.manager.shutdown import RunFailure, ShutdownRecord
from soakbench.runtime.manager.telemetry import CounterSnapshot, EpisodeTotals, TbWindow
from soakbench.runtime.metrics_schema import check_tags

PLAN = RunPlan(
    num_envs=8,
    slot_rows=4,
    total_iterations=10,
    prefill=2,
    ingress_depth=2,
    ring_capacity=1,
    metrics_interval=1,
    save_interval=5,
    heartbeat_s=5.0,
    fault_at=None,
    learner_device="cpu",
    physics_device="cpu",
    sim_backend="mujoco",
    sharing_configured=None,
    sharing_resolved=None,
)
SNAP = CounterSnapshot(iterations=10, total_env_steps=80, learner_updates=8, learner_wait_s=0.5)
HELLO = Hello(
    obs_dim=6,
    action_dim=3,
    backend_type="mujoco",
    data_plane="host_bridge",
    device="cpu",
    actor_state_size=100,
    backend_diagnostics={"available": False, "backend_type": "mujoco", "unavailable_reason": "none declared"},
)


def _control(iterations: int = 0, episodes: int = 0, inference_s: float = 0.0, **sums: float) -> ControlStats:
    return ControlStats(
        finish=0,
        iterations=iterations,
        episodes=episodes,
        actor_version=0,
        episode_return_sum=sums.get("episode_return_sum", 0.0),
        episode_length_sum=sums.get("episode_length_sum", 0.0),
        env_step_s=0.0,
        inference_s=inference_s,
        publish_s=0.0,
    )


def _stats(control: ControlStats | None = None) -> ArenaStats:
    replay = empty_replay_stats(2, 4)
    replay["published_sequence"], replay["release_sequence"], replay["final_occupancy"] = 20, 19, 1
    ring = empty_ring_stats(1)
    ring["published_version"], ring["consumed_version"], ring["publication_lag"] = 5, 4, 1
    return ArenaStats(replay, ring, control)


def _report(**changes: Any) -> reporting.RunReport:
    base = reporting.RunReport(
        plan=PLAN,
        hooks=TrainerHooks(),
        counters=SNAP,
        stats=_stats(_control(iterations=10, inference_s=0.1234567)),
        hello=HELLO,
        memory_budgeted=True,
        learner_diagnostics=learner_diagnostics_payload(None),
        signalling_kind="eventfd",
        cuda_process_sharing=reporting.cuda_process_sharing(None, None, PLAN, None),
        collector_pid=123,
        collector_exitcode=0,
        loop_s=4.0,
        playback=None,
        started_unix_s=1.0,
        finished_unix_s=6.0,
        duration_s=5.0,
        exit_code=0,
    )
    return dataclasses.replace(base, **changes)


def test_progress_record_from_a_snapshot() -> None:
    stats = _stats()
    before = copy.deepcopy(stats)
    record = reporting.progress_record(SNAP, stats, "startup", 1.23456789, 42.123456, final=True)
    assert record == {
        "elapsed_s": 1.234568,
        "iteration": 10,
        "total_env_steps": 80,
        "env_steps_per_s": 42.123,
        "learner_updates": 8,
        "phase": "prefill",  # the soak monitor's vocabulary has no start-up phase
        "replay": {
            "published_sequence": 20,
            "release_sequence": 19,
            "high_water_occupancy": 0,
            "backpressure_waits": 0,
            "backpressure_wait_s": 0.0,
            "early_returns": 0,
            "dropped_batches": 0,
            "closed_returns": 0,
            "stop_returns": 0,
            "occupancy": 1,
        },
        "inference": {
            "queue_depth": 0,
            "publication_lag": 1,
            "max_in_flight": 0,
            "max_publication_lag": 0,
            "events": 0,
            "published_version": 5,
            "consumed_version": 4,
        },
        "final": True,
    }
    assert stats == before  # inputs are read, never changed
    assert "final" not in reporting.progress_record(SNAP, stats, "train", 0.0, 0.0, final=False)


def test_tb_scalars_rates_counters_and_schema_tags() -> None:
    window = TbWindow(seconds=2.0, learner_updates=4, env_steps=16, learner_wait_s=3.0, episodes=None)
    scalars = reporting.tb_scalars(SNAP, window, {"loss/critic": 0.5}, _stats())
    check_tags(scalars)  # every tag is one of metric schema v1
    assert scalars["loss/critic"] == 0.5
    assert scalars["learner/updates_per_s"] == 2.0
    assert scalars["throughput/env_steps_per_s"] == 8.0
    assert scalars["learner/ingress_wait_share"] == 1.0  # a share, capped
    assert scalars["replay/occupancy"] == 1 and scalars["inference/publication_lag"] == 1
    assert not any(k.startswith("episode/") for k in scalars)  # no control segment, no episode tags


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (EpisodeTotals(0, 0.0, 0.0), {"episode/count": 0}),
        (
            EpisodeTotals(4, 10.0, 28.0),
            {"episode/count": 4, "episode/reward_mean": 2.5, "episode/length_mean": 7.0},
        ),
    ],
)
def test_tb_episode_means_cover_the_window_only(new: EpisodeTotals, expected: dict[str, float]) -> None:
    window = TbWindow(seconds=1.0, learner_updates=0, env_steps=0, learner_wait_s=0.0, episodes=new)
    scalars = reporting.tb_scalars(SNAP, window, {}, _stats())
    assert {k: v for k, v in scalars.items() if k.startswith("episode/")} == expected


def test_episode_totals_from_the_control_segment() -> None:
    assert reporting.episode_totals(None) is None
    control = _control(episodes=3, episode_return_sum=1.5, episode_length_sum=21.0)
    assert reporting.episode_totals(control) == EpisodeTotals(3, 1.5, 21.0)


def test_summary_and_manifest_validate_and_carry_the_facts() -> None:
    record = ShutdownRecord("normal_completion", "finalize")
    summary = reporting.build_summary(_report(), record)
    validate(summary, RUN_SUMMARY_SCHEMA)
    assert summary["env_steps_per_s"] == 20.0 and summary["learner_updates_per_s"] == 2.0
    m = summary["runtime_manifest"]
    assert m["limits"]["slots_per_iteration"] == 2 and m["limits"]["shutdown_deadline_s"] == 8.0
    assert m["devices"] == {
        "learner": "cpu",
        "collector": "cpu",
        "backend_type": "mujoco",
        "data_plane": "host_bridge",
        "arena": "posix_shm",
    }
    assert m["memory_budget"]["ingress_bytes"] == 4 * 2 * 4 * (2 * 6 + 3 + 2)
    assert m["memory_budget"]["ring_bytes"] == 4 * 1 * 100
    assert m["replay_ingress"]["learner_wait_s"] == 0.5 and m["replay_ingress"]["final_occupancy"] == 1
    assert m["collector"] == {
        "pid": 123,
        "exitcode": 0,
        "iterations": 10,
        "inference_s": 0.123457,
        "env_step_s": 0.0,
        "publish_s": 0.0,
    }
    assert m["learner_diagnostics"]["available"] is False


def test_manifest_of_a_run_that_never_attached() -> None:
    report = _report(hello=None, memory_budgeted=False, stats=ArenaStats.empty(PLAN), loop_s=0.0)
    failure = RunFailure("backend_worker_failure", "env build failed", exc_type="RuntimeError")
    summary = reporting.build_summary(report, ShutdownRecord.from_failure(failure, "startup"))
    validate(summary, RUN_SUMMARY_SCHEMA)
    m = summary["runtime_manifest"]
    assert m["memory_budget"] is None
    assert m["backend_diagnostics"]["available"] is False and m["devices"]["data_plane"] is None
    assert m["collector"]["iterations"] == 0
    assert summary["env_steps_per_s"] == 0.0  # no training loop ran: no rate
    assert summary["failure_classification"] == "backend_worker_failure"


def test_cuda_process_sharing_block() -> None:
    cpu = reporting.cuda_process_sharing(None, None, PLAN, None)
    assert cpu["effective"] is None and cpu["ambient"] is None and "does not apply" in cpu["note"]
    cuda_plan = dataclasses.replace(PLAN, learner_device="cuda")
    ambient = {"raw_cuda_mps_pipe_directory": None}
    cuda = reporting.cuda_process_sharing({"configured": None, "effective": None}, None, cuda_plan, ambient)
    assert cuda["effective"] == "none" and cuda["ambient"] == ambient and "note" not in cuda
    mps = reporting.cuda_process_sharing({"configured": "mps", "effective": "mps"}, "mps", cuda_plan, ambient)
    assert mps["effective"] == "mps"
    manifest = reporting.manifest(_report(plan=cuda_plan, cuda_process_sharing=cuda), ShutdownRecord())
    validate(manifest, RUNTIME_MANIFEST_SCHEMA)
    assert manifest["devices"]["arena"] == "posix_shm"  # the arena follows the physics device


def test_schema_failure_summary_is_an_explicit_failure() -> None:
    summary = reporting.build_summary(_report(), ShutdownRecord("normal_completion", "finalize"))
    out = reporting.schema_failure_summary(summary, "bad field")
    assert out["status"] == "failed" and out["exit_code"] == 1
    assert out["failure_classification"] == "unknown_failure" and "bad field" in out["failure_reason"]
    assert out["runtime_manifest"]["shutdown"]["owner"] == "manager"
    assert summary["status"] == "completed"  # the original is left as it was
    validate(out, RUN_SUMMARY_SCHEMA)


def test_collector_reports_and_exit_codes_are_classified() -> None:
    backend = failure_from_report({"owner": "backend_worker", "type": "FloatingPointError", "message": "nan"})
    assert backend.classification == "backend_worker_failure" and backend.exc_type == "FloatingPointError"
    assert "backend worker" in str(backend) and "nan" in str(backend)
    other = failure_from_report({"owner": "collector", "type": "KeyError", "message": "x"})
    assert other.classification == "collector_failure"
    assert describe_exitcode(-9) == "exit code -9 (SIGKILL)"
    assert describe_exitcode(3) == "exit code 3"
    assert describe_exitcode(None) == "no exit code"
    assert describe_exitcode(-200) == "exit code -200"
