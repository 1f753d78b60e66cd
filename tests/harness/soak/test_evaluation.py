"""The soak pass table and failure classification (harness/soak/evaluation.py), from fixtures."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from foundation.vocab import SOAK_FAILURE_CLASSIFICATIONS
from harness.soak.evaluation import (
    CRITERIA,
    Evaluation,
    MonitorObservation,
    evaluate,
)
from harness.soak.trends import leak_verdicts

FIXTURES = Path(__file__).parent / "fixtures"


def _json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def _samples(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


CLEAN_LEAKS = leak_verdicts(_samples("samples_clean.jsonl"), 40.0)


def observe(**changes: Any) -> MonitorObservation:
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
    }
    base.update(changes)
    return MonitorObservation(**base)


def result_of(evaluation: Evaluation, name: str) -> str:
    return next(c.result for c in evaluation.criteria if c.name == name)


def test_clean_run_passes_every_row_in_table_order() -> None:
    ev = evaluate(observe())
    assert ev.status == "passed"
    assert ev.failure_reason is None and ev.failure_classification is None
    assert [c.name for c in ev.criteria] == list(CRITERIA)
    assert {c.result for c in ev.criteria} == {"pass"}


def test_monitor_mode_marks_run_summary_rows_not_applicable() -> None:
    ev = evaluate(observe(mode="monitor", run_summary=None))
    assert ev.status == "passed"
    na = [c.name for c in ev.criteria if c.result == "not_applicable"]
    assert na == list(CRITERIA[2:11])


def _mutated(path: str, value: Any) -> dict[str, Any]:
    summary: dict[str, Any] = copy.deepcopy(_json("run_summary_completed.json"))
    node = summary
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return summary


@pytest.mark.parametrize(
    ("path", "value", "row"),
    [
        ("status", "cancelled", "run_status"),
        ("failure_reason", "learner raised", "run_failure"),
        ("runtime_manifest.inference_flight.final_queue_depth", 1, "inference_drained"),
        ("runtime_manifest.inference_flight.final_publication_lag", 2, "inference_drained"),
        ("runtime_manifest.replay_ingress.final_occupancy", 1, "replay_final_occupancy"),
        ("runtime_manifest.replay_ingress.dropped_batches", 3, "replay_no_drops"),
        ("runtime_manifest.replay_ingress.early_returns", 3, "replay_no_drops"),
        ("runtime_manifest.replay_ingress.release_sequence", 1199, "replay_release_sequence"),
        ("total_env_steps", 1228801, "replay_published_sequence"),
        ("runtime_manifest.shutdown.classification", "unknown_failure", "shutdown_classification"),
        ("runtime_manifest.shutdown.cleanup", {"errors": ["unlink failed"]}, "shutdown_cleanup_errors"),
        ("runtime_manifest.shutdown.cleanup", {}, "shutdown_cleanup_errors"),
    ],
)
def test_each_run_contract_row_fails_alone(path: str, value: Any, row: str) -> None:
    ev = evaluate(observe(run_summary=_mutated(path, value)))
    assert ev.status == "failed"
    assert ev.failure_classification == "run_contract_violation"
    assert [c.name for c in ev.criteria if c.result == "fail"] == [row]
    assert ev.failure_reason is not None and ev.failure_reason.startswith(f"criterion {row} failed")


def test_missing_manifest_field_is_named_in_the_value() -> None:
    summary = _json("run_summary_completed.json")
    del summary["runtime_manifest"]["replay_ingress"]["final_occupancy"]
    ev = evaluate(observe(run_summary=summary))
    row = next(c for c in ev.criteria if c.name == "replay_final_occupancy")
    assert row.result == "fail"
    assert row.value == "missing: runtime_manifest.replay_ingress.final_occupancy"


def test_missing_run_summary_in_run_mode() -> None:
    ev = evaluate(observe(run_summary=None, run_summary_error="run_summary.json: not JSON"))
    assert ev.failure_classification == "run_summary_missing"
    assert "not JSON" in str(next(c.value for c in ev.criteria if c.name == "run_status"))


@pytest.mark.parametrize(
    "failure", ["timeout/startup", "timeout/stale_tick", "external_cancellation", "monitor_error"]
)
def test_monitor_failure_wins_over_everything(failure: str) -> None:
    ev = evaluate(
        observe(
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
    ev = evaluate(observe(trainer_returncode=1, run_summary=_json("run_summary_collector_failure.json")))
    assert ev.failure_classification == "collector_failure"
    assert result_of(ev, "shutdown_classification") == "fail"


def test_trainer_exit_without_summary_or_with_normal_shutdown_is_trainer_failure() -> None:
    assert (
        evaluate(observe(trainer_returncode=2, run_summary=None)).failure_classification == "trainer_failure"
    )
    normal = _json("run_summary_completed.json")
    assert (
        evaluate(observe(trainer_returncode=1, run_summary=normal)).failure_classification
        == "trainer_failure"
    )
    monitored = observe(mode="monitor", trainer_returncode=3, run_summary=None)
    assert evaluate(monitored).failure_classification == "trainer_failure"


def test_residuals_orphaned_shm_and_growth_are_resource_leaks() -> None:
    residual = evaluate(observe(residual_processes=[{"pid": 77, "start_ticks": 5, "name": "daemon"}]))
    assert residual.failure_classification == "resource_leak"
    assert residual.failure_reason is not None and "pid 77 (daemon)" in residual.failure_reason
    shm = evaluate(
        observe(orphaned_shm_segments=[{"name": "soakbench_1_x", "path": "/dev/shm/soakbench_1_x"}])
    )
    assert shm.failure_classification == "resource_leak"
    assert shm.failure_reason is not None and "/dev/shm/soakbench_1_x" in shm.failure_reason
    leaking = leak_verdicts(_samples("samples_eventfd_leak.jsonl"), 40.0)
    growth = evaluate(observe(leak_verdicts=leaking))
    assert growth.failure_classification == "resource_leak"
    assert growth.failure_reason == (
        "criterion leak_verdicts failed: resource classes still growing after start-up: eventfd, fd_total."
    )


def test_insufficient_data_is_not_a_failure_and_bare_verdict_maps_are_accepted() -> None:
    bare = {c: "insufficient_data" for c in CLEAN_LEAKS["leak_verdicts"]}
    assert evaluate(observe(leak_verdicts=bare)).status == "passed"


def test_short_run_is_too_short() -> None:
    ev = evaluate(observe(duration_s=120.0))
    assert ev.failure_classification == "too_short"
    assert result_of(ev, "min_duration") == "fail"


def test_out_of_vocabulary_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="monitor_failure"):
        evaluate(observe(monitor_failure="oops"))
    with pytest.raises(ValueError, match="mode"):
        evaluate(observe(mode="both"))


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
        assert evaluate(obs).failure_classification in SOAK_FAILURE_CLASSIFICATIONS
