"""The soak pass table and failure classification (harness/soak/verdicts/evaluation.py), from fixtures."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.foundation.vocab import SOAK_FAILURE_CLASSIFICATIONS
from soakbench.harness.soak.verdicts.drift import throughput_drift
from soakbench.harness.soak.verdicts.evaluation import (
    CRITERIA,
    NEEDS_SUMMARY,
    Evaluation,
    MonitorObservation,
    evaluate,
)
from soakbench.harness.soak.verdicts.first_death import FirstDeath
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.gpu import assess_gpu
from soakbench.harness.soak.verdicts.observation import observe_classes
from soakbench.harness.soak.verdicts.trends import LeakTrends, leak_verdicts
from tests.harness.soak._observations import split
from tests.harness.soak.verdicts import _gpu_data as gpu_data

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def _samples(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


CLEAN_LEAKS = leak_verdicts(_samples("samples_clean.jsonl"), 40.0)
CLEAN_OBSERVATION = observe_classes(_samples("samples_clean.jsonl"), CLEAN_LEAKS, 30)
CLEAN_DRIFT = throughput_drift(_samples("samples_clean.jsonl"), 40.0)
GPU_SAMPLES = [gpu_data.sample(float(t)) for t in range(10)]
CLEAN_GPU = assess_gpu(gpu_data.raw(), GPU_SAMPLES)


# every exit of the tree observed, none by a signal
CLEAN_EXITS = {"observable": True, "reason": None, "allowed_roles": [], "exits": []}


def observe(**changes: Any) -> tuple[MonitorObservation, Gates]:
    base: dict[str, Any] = {
        "mode": "run",
        "monitor_failure": None,
        "trainer_returncode": 0,
        "run_summary": _json("run_summary_completed.json"),
        "residual_processes": [],
        "orphaned_shm_segments": [],
        "leak_verdicts": CLEAN_LEAKS,
        "duration_s": 1200.0,
        "min_duration_s": 600.0,
        "observation": CLEAN_OBSERVATION,
        "throughput_drift": CLEAN_DRIFT,
        "fail_on_throughput_drift": True,  # every row judged, so a clean run passes all of them
        "gpu_health": CLEAN_GPU,
        "fail_on_gpu_throttle": True,
        "tree_exits": CLEAN_EXITS,
    }
    base.update(changes)
    return split(**base)


def result_of(evaluation: Evaluation, name: str) -> str:
    return next(c.result for c in evaluation.criteria if c.name == name)


def test_clean_run_passes_every_row_in_table_order() -> None:
    ev = evaluate(*observe())
    assert ev.status == "passed"
    assert ev.failure_reason is None and ev.failure_classification is None
    # an observation without a survival projection (an artifact that recorded none) has no such row
    assert [c.name for c in ev.criteria] == [name for name in CRITERIA if name != "survival"]
    assert {c.result for c in ev.criteria} == {"pass"}


def test_monitor_mode_marks_run_summary_rows_not_applicable() -> None:
    ev = evaluate(*observe(mode="monitor", run_summary=None))
    assert ev.status == "passed"
    na = [c.name for c in ev.criteria if c.result == "not_applicable"]
    assert na == [c for c in CRITERIA if c in NEEDS_SUMMARY]


def _mutated(path: str, value: Any) -> dict[str, Any]:
    summary: dict[str, Any] = copy.deepcopy(_json("run_summary_completed.json"))
    node = summary
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return summary


IF = "runtime_manifest.inference_flight"
RI = "runtime_manifest.replay_ingress"


def _mutated_all(changes: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = _json("run_summary_completed.json")
    for path, value in changes.items():
        summary = _mutated_from(summary, path, value)
    return summary


def _mutated_from(summary: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = summary
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return summary


# Each mutation keeps the summary schema-valid and its cross-invariants true (so only the row named
# fails); where a row cannot fail without another (occupancy and release sequence move together), the
# rows listed all fail, the first deciding the class.
@pytest.mark.parametrize(
    ("changes", "rows"),
    [
        (
            {"status": "cancelled", "failure_reason": "SIGTERM", "failure_classification": "external_cancellation"},
            ["run_status", "run_failure"],
        ),
        ({"runtime_manifest.shutdown.exception": {"type": "RuntimeError", "message": "learner raised"}}, ["run_failure"]),
        ({f"{IF}.final_queue_depth": 1, f"{IF}.final_publication_lag": 1, f"{IF}.consumed_version": 479}, ["inference_drained"]),
        ({f"{IF}.final_queue_depth": 2, f"{IF}.final_publication_lag": 2, f"{IF}.consumed_version": 478}, ["inference_drained"]),
        ({f"{RI}.final_occupancy": 1, f"{RI}.release_sequence": 1199}, ["replay_final_occupancy", "replay_release_sequence"]),
        ({f"{RI}.dropped_batches": 3, f"{RI}.early_returns": 3, f"{RI}.stop_returns": 3}, ["replay_no_drops"]),
        ({f"{RI}.dropped_batches": 3, f"{RI}.early_returns": 3, f"{RI}.closed_returns": 3}, ["replay_no_drops"]),
        ({"total_env_steps": 1228801}, ["replay_published_sequence"]),
        ({"runtime_manifest.shutdown.classification": "unknown_failure"}, ["shutdown_classification"]),
        ({"runtime_manifest.shutdown.cleanup": {"errors": ["unlink failed"]}}, ["shutdown_cleanup_errors"]),
    ],
)  # fmt: skip
def test_each_run_contract_row_fails_alone(changes: dict[str, Any], rows: list[str]) -> None:
    ev = evaluate(*observe(run_summary=_mutated_all(changes)))
    assert ev.status == "failed"
    assert ev.failure_classification == "run_contract_violation"
    assert [c.name for c in ev.criteria if c.result == "fail"] == rows
    assert ev.failure_reason is not None and ev.failure_reason.startswith(f"criterion {rows[0]} failed")


@pytest.mark.parametrize(
    ("changes", "row", "classification", "named"),
    [
        ({"metric_schema_version": "1"}, "run_summary_schema", "schema_violation", 'metric_schema_version = "1"'),
        ({"metric_schema_version": 1.0}, "run_summary_schema", "schema_violation", "must be the integer 1"),
        ({"metric_schema_version": True}, "run_summary_schema", "schema_violation", "metric_schema_version = true"),
        ({"runtime_manifest.schema_version": 2}, "run_summary_schema", "schema_violation",
         "runtime_manifest.schema_version = 2"),
        ({"runtime_manifest.shutdown.cleanup": {}}, "shutdown_contract", "shutdown_contract_violation",
         "cleanup.errors = null: must be a list"),
        ({f"{RI}.final_occupancy": 1}, "replay_invariants", "run_contract_violation",
         "must equal published_sequence - release_sequence = 0"),
        ({f"{RI}.high_water_occupancy": 5}, "replay_invariants", "run_contract_violation", "<= depth (4)"),
        ({f"{RI}.high_water_occupancy": 0}, "replay_invariants", "run_contract_violation", "must be > 0"),
        ({f"{RI}.dropped_batches": 3}, "replay_invariants", "run_contract_violation", "must equal early_returns (0)"),
        ({f"{RI}.early_returns": 3, f"{RI}.dropped_batches": 3}, "replay_invariants", "run_contract_violation",
         "closed_returns + stop_returns = 0"),
        ({f"{RI}.backpressure_wait_s": float("inf")}, "replay_invariants", "run_contract_violation",
         "finite and >= 0"),
        ({f"{IF}.final_publication_lag": 3}, "inference_invariants", "run_contract_violation",
         "published_version - consumed_version = 0"),
        ({f"{IF}.max_in_flight": 9}, "inference_invariants", "run_contract_violation", "slot_capacity (4)"),
        ({"runtime_manifest.shutdown.classification": "fine"}, "shutdown_contract", "shutdown_contract_violation",
         "must be one of normal_completion"),
        ({"runtime_manifest.shutdown.owner": ""}, "shutdown_contract", "shutdown_contract_violation",
         "non-empty string"),
        ({"runtime_manifest.shutdown.exception": "boom"}, "shutdown_contract", "shutdown_contract_violation",
         "null or {type: str, message: str}"),
    ],
)  # fmt: skip
def test_each_contract_rule_names_field_value_and_rule(
    changes: dict[str, Any], row: str, classification: str, named: str
) -> None:
    ev = evaluate(*observe(run_summary=_mutated_all(changes)))
    assert ev.failure_classification == classification
    judged = next(c for c in ev.criteria if c.name == row)
    assert judged.result == "fail"
    said = [f"{v['field']} = {json.dumps(v['value'])}: {v['rule']}" for v in judged.value]
    assert any(named in text for text in said), said  # each violation names field, value and rule
    assert ev.failure_reason is not None
    if ev.failure_reason.startswith(f"criterion {row} failed"):
        assert named in ev.failure_reason, ev.failure_reason


def test_nonzero_exit_claiming_normal_completion_is_a_shutdown_contract_violation() -> None:
    ev = evaluate(*observe(trainer_returncode=1))
    assert ev.failure_classification == "shutdown_contract_violation"
    assert ev.failure_reason is not None
    assert "a trainer that exited 1 cannot claim normal_completion" in ev.failure_reason


def test_run_contract_in_monitor_mode_judges_the_summary() -> None:
    judged = evaluate(
        *observe(mode="monitor", run_contract=True, run_summary=_mutated_all({"metric_schema_version": "1"}))
    )
    assert judged.failure_classification == "schema_violation"
    missing = evaluate(*observe(mode="monitor", run_contract=True, run_summary=None))
    assert missing.failure_classification == "run_summary_missing"


def test_observation_rule() -> None:
    few = leak_verdicts(_samples("samples_clean.jsonl")[100:140], 500.0)
    short = evaluate(
        *observe(
            leak_verdicts=few, observation=observe_classes(_samples("samples_clean.jsonl")[100:140], few, 30)
        )
    )
    assert short.failure_classification == "insufficient_observation"
    assert short.failure_reason is not None and ">= 30 post-start-up samples" in short.failure_reason
    assert "rss: insufficient_data" in short.failure_reason
    gpu = next(c.value for c in evaluate(*observe()).criteria if c.name == "trend_observation")["gpu_memory"]
    assert gpu.startswith("not_observable (GPU memory not observable: NVML")
    assert evaluate(*observe(observation=None)).failure_classification == "insufficient_observation"


def test_missing_manifest_field_is_named_in_the_value() -> None:
    summary = _json("run_summary_completed.json")
    del summary["runtime_manifest"]["replay_ingress"]["final_occupancy"]
    ev = evaluate(*observe(run_summary=summary))
    row = next(c for c in ev.criteria if c.name == "replay_final_occupancy")
    assert row.result == "fail"
    assert row.value == "missing: runtime_manifest.replay_ingress.final_occupancy"


def test_missing_run_summary_in_run_mode() -> None:
    ev = evaluate(*observe(run_summary=None, run_summary_error="run_summary.json: not JSON"))
    assert ev.failure_classification == "run_summary_missing"
    assert "not JSON" in str(next(c.value for c in ev.criteria if c.name == "run_status"))


@pytest.mark.parametrize(
    "failure", ["timeout/startup", "timeout/stale_tick", "external_cancellation", "monitor_error"]
)
def test_monitor_failure_wins_over_everything(failure: str) -> None:
    ev = evaluate(
        *observe(
            monitor_failure=failure,
            trainer_returncode=-15,
            run_summary=None,
            residual_processes=[{"pid": 9, "start_ticks": 1, "name": "x"}],
            duration_s=3.0,
        )
    )
    assert ev.failure_classification == failure
    assert ev.failure_reason is not None and ev.failure_reason.startswith("criterion monitor_status failed")
    assert "also failed: trainer_returncode" in ev.failure_reason


def test_trainer_exit_takes_the_run_summary_shutdown_classification() -> None:
    ev = evaluate(*observe(trainer_returncode=1, run_summary=_json("run_summary_collector_failure.json")))
    assert ev.failure_classification == "collector_failure"
    assert result_of(ev, "shutdown_classification") == "fail"


def test_trainer_exit_without_summary_is_trainer_failure_and_with_normal_shutdown_a_violation() -> None:
    assert (
        evaluate(*observe(trainer_returncode=2, run_summary=None)).failure_classification == "trainer_failure"
    )
    normal = _json("run_summary_completed.json")  # exit 1 while claiming normal_completion (issue 12)
    assert (
        evaluate(*observe(trainer_returncode=1, run_summary=normal)).failure_classification
        == "shutdown_contract_violation"
    )
    monitored = observe(mode="monitor", trainer_returncode=3, run_summary=None)
    assert evaluate(*monitored).failure_classification == "trainer_failure"


def test_residuals_orphaned_shm_and_growth_are_resource_leaks() -> None:
    residual = evaluate(*observe(residual_processes=[{"pid": 77, "start_ticks": 5, "name": "daemon"}]))
    assert residual.failure_classification == "resource_leak"
    assert residual.failure_reason is not None and "pid 77 (daemon)" in residual.failure_reason
    shm = evaluate(
        *observe(orphaned_shm_segments=[{"name": "soakbench_1_x", "path": "/dev/shm/soakbench_1_x"}])
    )
    assert shm.failure_classification == "resource_leak"
    assert shm.failure_reason is not None and "/dev/shm/soakbench_1_x" in shm.failure_reason
    leaking = leak_verdicts(_samples("samples_eventfd_leak.jsonl"), 40.0)
    growth = evaluate(*observe(leak_verdicts=leaking))
    assert growth.failure_classification == "resource_leak"
    assert growth.failure_reason == (
        "criterion leak_verdicts failed: resource classes still growing after start-up: eventfd, fd_total."
    )


def test_insufficient_data_is_not_a_failure_and_bare_verdict_maps_are_accepted() -> None:
    bare = LeakTrends.of_verdicts({c: "insufficient_data" for c in CLEAN_LEAKS.verdicts})
    assert evaluate(*observe(leak_verdicts=bare)).status == "passed"


def test_short_run_is_too_short() -> None:
    ev = evaluate(*observe(duration_s=120.0))
    assert ev.failure_classification == "too_short"
    assert result_of(ev, "min_duration") == "fail"


def test_out_of_vocabulary_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="monitor_failure"):
        evaluate(*observe(monitor_failure="oops"))
    with pytest.raises(ValueError, match="mode"):
        evaluate(*observe(mode="both"))


def test_every_classification_produced_is_in_the_closed_vocabulary() -> None:
    observations = [
        observe(monitor_failure="timeout/startup"),
        observe(trainer_returncode=1, run_summary=_json("run_summary_collector_failure.json")),
        observe(trainer_returncode=1, run_summary=None),
        observe(run_summary=None),
        observe(run_summary=_mutated("status", "failed")),
        observe(residual_processes=[{"pid": 1, "start_ticks": 1}]),
        observe(duration_s=0.0),
    ]
    for obs in observations:
        assert evaluate(*obs).failure_classification in SOAK_FAILURE_CLASSIFICATIONS


def _gpu(**raw: Any) -> Any:
    return assess_gpu(gpu_data.raw(**raw), GPU_SAMPLES)


def test_a_trainer_that_died_after_a_critical_xid_is_a_gpu_fault() -> None:
    ev = evaluate(
        *observe(trainer_returncode=1, run_summary=None, gpu_health=_gpu(events=[gpu_data.xid(79, 12.5)]))
    )
    assert ev.failure_classification == "gpu_fault"
    assert ev.failure_reason is not None
    assert ev.failure_reason.startswith("criterion gpu_xid_errors failed: critical XID 79 on GPU 0 (GPU-0)")
    assert "also failed: trainer_returncode" in ev.failure_reason


def test_gpu_fault_also_explains_a_hang_but_not_a_cancellation_nor_an_oom_kill() -> None:
    xid = _gpu(events=[gpu_data.xid(79, 12.5)])
    hung = evaluate(*observe(monitor_failure="timeout/stale_tick", trainer_returncode=-15, gpu_health=xid))
    assert hung.failure_classification == "gpu_fault"
    cancelled = evaluate(
        *observe(monitor_failure="external_cancellation", trainer_returncode=-15, gpu_health=xid)
    )
    assert cancelled.failure_classification == "external_cancellation"
    killed = evaluate(
        *observe(trainer_returncode=-9, gpu_health=xid, oom_kills=["trainer (pid 7) OOM-killed"])
    )
    assert killed.failure_classification == "oom_killed"


def test_gpu_rows_decide_when_they_fail_first() -> None:
    survived = evaluate(*observe(gpu_health=_gpu(events=[gpu_data.xid(48, 3.0)])))  # exit 0 despite the XID
    assert survived.failure_classification == "gpu_fault"
    ecc = evaluate(*observe(gpu_health=_gpu(devices=[gpu_data.device(start=0, end=1)])))
    assert ecc.failure_classification == "gpu_fault" and result_of(ecc, "gpu_ecc_uncorrected") == "fail"
    hot = [gpu_data.sample(float(t), gpu_data.reading(reasons=("HwThermal",))) for t in range(5)]
    throttled = evaluate(*observe(gpu_health=assess_gpu(gpu_data.raw(), hot)))
    assert throttled.failure_classification == "gpu_throttle"
    reported = evaluate(*observe(gpu_health=assess_gpu(gpu_data.raw(), hot), fail_on_gpu_throttle=False))
    assert reported.status == "passed" and result_of(reported, "gpu_throttle") == "not_applicable"


def test_a_host_without_nvml_passes_with_gpu_rows_not_applicable() -> None:
    off = gpu_data.unavailable()
    ev = evaluate(*observe(gpu_health=assess_gpu(off, []), fail_on_gpu_throttle=True))
    assert ev.status == "passed"
    gpu_rows = [c for c in ev.criteria if c.name.startswith("gpu_")]
    assert [c.result for c in gpu_rows] == ["not_applicable"] * 3
    assert all(off["reason"] in c.value for c in gpu_rows)
    assert SOAK_FAILURE_CLASSIFICATIONS[-3:] == ("gpu_fault", "gpu_throttle", "tree_process_killed")


def _job_summary(reason: str) -> dict[str, Any]:
    """A failed job summary of two ranks as rank 0 writes it: rank 0's own end was its peer's failure."""
    summary = copy.deepcopy(_json("run_summary_completed.json"))
    summary.update(
        status="failed", failure_classification="learner_failure", failure_reason=reason, exit_code=1
    )
    summary["runtime_manifest"]["shutdown"]["classification"] = "peer_failure"
    entry = {"status": "failed", "exit_code": 1, "total_env_steps": 0, "params_checksum": None}
    summary["distributed"] = {
        "rank": 0, "local_rank": 0, "world_size": 2, "backend": "gloo", "run_id": "r", "restart_count": 0,
        "params_checksum": None, "params_identical": None,
        "ranks": [
            {**entry, "rank": 0, "summary": "rank-0/run_summary.json", "failure_classification": "peer_failure",
             "failure_reason": "all_reduce failed: Connection closed by peer"},
            {**entry, "rank": 1, "summary": "rank-1/run_summary.json", "failure_classification": "learner_failure",
             "failure_reason": "ValueError: nan"},
        ],
    }  # fmt: skip
    return summary


def test_a_failed_job_of_ranks_is_a_rank_failure_naming_the_first_rank_not_rank_0s_view() -> None:
    ev = evaluate(*observe(trainer_returncode=1, run_summary=_job_summary("rank 1: ValueError: nan")))
    assert ev.failure_classification == "rank_failure"
    assert ev.failure_reason is not None
    assert ev.failure_reason.startswith(
        "criterion trainer_returncode failed: expected 0, got 1; rank 1: ValueError"
    )
    single = evaluate(*observe(trainer_returncode=1, run_summary=_mutated("status", "failed")))
    assert single.failure_classification != "rank_failure"  # one process: its own classification, as before


def test_a_command_that_failed_after_a_descendant_died_names_that_death() -> None:
    death = FirstDeath(pid=7, start_ticks=70, name="python", role="worker", rank=None, interval_ranks=(),
                       last_seen_t=4.0, gone_by_t=4.5, exited_t=None, before_root_s=0.5,
                       exit="exit status not observable (reaped by its own parent)")  # fmt: skip
    ev = evaluate(*observe(mode="monitor", trainer_returncode=1, run_summary=None, first_death=death))
    assert ev.failure_classification == "trainer_failure"
    assert (
        ev.failure_reason is not None
        and "; first death: pid 7 (worker) went between t=4 s" in ev.failure_reason
    )
    ranked = evaluate(
        *observe(
            mode="monitor",
            trainer_returncode=1,
            run_summary=None,
            first_death=dataclasses.replace(death, rank=1, interval_ranks=(1,)),
        )
    )
    assert ranked.failure_classification == "rank_failure"
    assert ranked.failure_reason is not None and "; first death: rank 1 pid 7" in ranked.failure_reason
    # a helper of no rank went first, but a rank died in the same interval: the class is the interval's
    beside = evaluate(
        *observe(
            mode="monitor",
            trainer_returncode=1,
            run_summary=None,
            first_death=dataclasses.replace(death, interval_ranks=(1,)),
        )
    )
    assert beside.failure_classification == "rank_failure"
