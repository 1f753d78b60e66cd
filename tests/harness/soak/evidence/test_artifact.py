"""Soak artifact 0.4.0 (and 0.3.0, still read): schema, build, atomic validated write, load (harness/soak/evidence/artifact.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from soakbench.foundation.vocab import SOAK_FAILURE_CLASSIFICATIONS
from soakbench.harness.soak.evidence.artifact import (
    SCHEMA_NAME,
    ArtifactError,
    MonitorRecord,
    build_artifact,
    load_artifact,
    load_schema,
    validation_errors,
    write_artifact,
)
from soakbench.harness.soak.verdicts.judgement import judgement_of
from soakbench.harness.soak.verdicts.observation import observe_classes
from soakbench.harness.soak.verdicts.trends import leak_verdicts
from tests.harness.soak._observations import split

FIXTURES = Path(__file__).parents[1] / "fixtures"
TIMING = {
    "sample_interval_s": 5.0,
    "startup_timeout_s": 900.0,
    "stale_progress_s": 300.0,
    "post_shutdown_grace_s": 10.0,
    "min_duration_s": 600.0,
    "duration_s": 1200.0,
    "started_at": 1.7e9,
    "finished_at": 1.7e9 + 1200,
}


def _json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def _samples(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def build(**obs_changes: Any) -> dict[str, Any]:
    samples = _samples("samples_clean.jsonl")
    fields: dict[str, Any] = {
        "mode": "run",
        "monitor_failure": None,
        "trainer_returncode": 0,
        "run_summary": _json("run_summary_completed.json"),
        "residual_processes": [],
        "orphaned_shm_segments": [],
        "leak_verdicts": leak_verdicts(samples, 40.0),
        "duration_s": 1200.0,
        "min_duration_s": 600.0,
        "observation": observe_classes(samples, leak_verdicts(samples, 40.0), 30),
    }
    fields.update(obs_changes)
    obs = split(**fields)
    record = MonitorRecord(
        samples=samples,
        samples_path="/abs/run.samples.jsonl",
        timing=TIMING,
        command=["train", "--algo", "flashsac"],
        log_dir="/abs/run",
        startup_end_t=40.0,
    )
    return build_artifact(judgement=judgement_of(*obs), record=record, context=_json("context.json"))


def test_schema_is_a_valid_draft_2020_12_schema_with_the_closed_vocabulary() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["$defs"]["failure_classification"]["enum"]) == {*SOAK_FAILURE_CLASSIFICATIONS, None}


def test_issue_required_fields_are_required() -> None:
    schema = load_schema()
    for name in (
        "artifact_schema_version", "mode", "status", "trainer_returncode", "run_status", "failure_reason",
        "failure_classification", "inference", "replay", "shutdown", "post_shutdown_residual_processes",
        "orphaned_shm_segments", "resource_summary", "samples_path", "context",
    ):  # fmt: skip
        assert name in schema["required"], name
    props = schema["properties"]
    assert set(props["replay"]["required"]) == {
        "final_occupancy", "dropped_batches", "early_returns", "published_sequence", "release_sequence",
        "ingress_slot_rows", "total_env_steps",
    }  # fmt: skip
    assert set(props["context"]["required"]) == {"source", "gpu", "software", "environment", "host"}
    assert {"peaks", "leak_verdicts", "trends"} <= set(props["resource_summary"]["required"])


def test_committed_fixture_artifacts_are_valid_and_reevaluate_identically() -> None:
    for name, status in (("artifact_clean.json", "passed"), ("artifact_eventfd_leak.json", "failed")):
        artifact = load_artifact(FIXTURES / name)
        assert artifact["status"] == status
        samples = _samples(Path(artifact["samples_path"]).name)
        verdicts = leak_verdicts(samples, artifact["resource_summary"]["startup_end_t"])
        assert verdicts.verdicts == artifact["resource_summary"]["leak_verdicts"]


def test_built_artifact_carries_the_run_summary_numbers_and_peaks() -> None:
    artifact = build()
    assert validation_errors(artifact) == []
    assert artifact["status"] == "passed"
    assert artifact["run_status"] == "completed"
    assert artifact["replay"]["ingress_slot_rows"] == 1024
    assert artifact["replay"]["published_sequence"] * 1024 == artifact["replay"]["total_env_steps"]
    assert artifact["shutdown"] == {
        "classification": "normal_completion",
        "cleanup_errors": [],
        "owner": "manager",
        "phase": "finalize",
        "exception": None,
    }
    peaks = artifact["resource_summary"]["peaks"]
    assert peaks["process_count"] == 3 and peaks["gpu_memory_bytes"] is None
    assert peaks["replay_high_water_occupancy"] == 3 and peaks["inference_events"] == 9600


def test_monitor_mode_takes_replay_and_inference_peaks_from_progress() -> None:
    artifact = build(mode="monitor", run_summary=None)
    assert validation_errors(artifact) == []
    assert artifact["run_status"] is None and artifact["replay"]["final_occupancy"] is None
    assert artifact["resource_summary"]["peaks"]["replay_high_water_occupancy"] == 2
    assert artifact["resource_summary"]["peaks"]["inference_max_in_flight"] == 1


def test_malformed_run_summary_still_gives_a_writable_failed_artifact(tmp_path: Path) -> None:
    summary = _json("run_summary_completed.json")
    summary["status"] = "weird"
    summary["runtime_manifest"]["replay_ingress"]["final_occupancy"] = "lots"
    summary["runtime_manifest"]["shutdown"]["exception"] = 42
    artifact = build(run_summary=summary)
    assert (
        artifact["status"] == "failed" and artifact["failure_classification"] == "shutdown_contract_violation"
    )
    write_artifact(tmp_path / "a.json", artifact)
    row = next(c for c in artifact["criteria"] if c["name"] == "replay_final_occupancy")
    assert row["value"] == "lots" and artifact["replay"]["final_occupancy"] is None


def test_write_is_atomic_and_refuses_invalid_artifacts_naming_the_path(tmp_path: Path) -> None:
    target = tmp_path / "soak.json"
    bad = build()
    bad["replay"]["final_occupancy"] = -1
    del bad["context"]["host"]["cores"]
    with pytest.raises(ArtifactError) as info:
        write_artifact(target, bad)
    message = str(info.value)
    assert "$.replay.final_occupancy" in message and "$.context.host" in message
    assert list(tmp_path.iterdir()) == []
    write_artifact(target, build())
    assert [p.name for p in tmp_path.iterdir()] == ["soak.json"]
    assert load_artifact(target)["status"] == "passed"


def test_status_and_failure_fields_must_agree() -> None:
    lying = build(residual_processes=[{"pid": 5, "start_ticks": 9, "name": "x"}])
    lying["status"] = "passed"
    errors = validation_errors(lying)
    assert any(e.startswith("$.failure_reason") for e in errors)
    assert any(e.startswith("$.criteria") for e in errors)


def test_load_rejects_future_old_and_broken_artifacts(tmp_path: Path) -> None:
    artifact = build()
    future = copy.deepcopy(artifact)
    future["artifact_schema_version"] = "0.5.0"
    (tmp_path / "future.json").write_text(json.dumps(future))
    with pytest.raises(ArtifactError, match=r"newer than the 0\.4\.0"):
        load_artifact(tmp_path / "future.json")
    old = dict(artifact, artifact_schema_version="0.2.0")
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(ArtifactError, match=r"'0\.2\.0' is not supported"):
        load_artifact(tmp_path / "old.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ArtifactError, match=r"broken\.json: not JSON"):
        load_artifact(tmp_path / "broken.json")
    with pytest.raises(ArtifactError, match="cannot read"):
        load_artifact(tmp_path / "absent.json")


def test_nan_is_refused(tmp_path: Path) -> None:
    artifact = build()
    artifact["monitor_overhead"] = {"cpu_share": float("nan")}
    with pytest.raises(ArtifactError, match="not plain JSON"):
        write_artifact(tmp_path / "x.json", artifact)
    assert SCHEMA_NAME == "soak-artifact-0.4.0.schema.json"


def test_monitor_object_is_validated() -> None:
    artifact = build()
    artifact["monitor"] = copy.deepcopy(load_artifact(FIXTURES / "artifact_clean.json")["monitor"])
    assert validation_errors(artifact) == []
    artifact["monitor"]["killed_by_monitor"] = [{"pid": 7}]
    del artifact["monitor"]["monitor_error"]
    errors = validation_errors(artifact)
    assert any(e.startswith("$.monitor:") and "monitor_error" in e for e in errors), errors
    assert any(e.startswith("$.monitor.killed_by_monitor[0]") for e in errors), errors
