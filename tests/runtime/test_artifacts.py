"""runtime.artifacts: atomic writes, schema validation of our documents, log_dir rules, progress log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from soakbench.runtime.artifacts import (
    RUN_SUMMARY_SCHEMA,
    RUNTIME_MANIFEST_SCHEMA,
    ArtifactError,
    ProgressLog,
    atomic_write_json,
    build_run_config,
    prepare_log_dir,
    read_run_summary,
    save_checkpoint,
    validate,
    write_run_config,
    write_run_summary,
)
from soakbench.runtime.config import compose


def _manifest(**shutdown: Any) -> dict[str, Any]:
    counts = {"published_sequence": 4, "release_sequence": 4, "final_occupancy": 0, "high_water_occupancy": 2}
    zeros = ("backpressure_waits", "early_returns", "dropped_batches", "closed_returns", "stop_returns")
    return {
        "schema_version": 1,
        "limits": {
            "num_envs": 8, "max_iterations": 4, "prefill_iterations": 1, "replay_ingress_depth": 2,
            "replay_ingress_slot_rows": 8, "slots_per_iteration": 1, "inference_slot_capacity": 1,
            "collector_metrics_interval": 1, "heartbeat_seconds": 5.0, "startup_timeout_s": 900.0,
            "stale_tick_timeout_s": 300.0, "shutdown_deadline_s": 8.0,
        },
        "devices": {"learner": "cpu", "collector": "cpu", "backend_type": "mujoco", "data_plane": "host_bridge",
                    "arena": "posix_shm"},
        "signalling": {"kind": "eventfd"},
        "inference_flight": {"final_queue_depth": 0, "final_publication_lag": 0, "max_in_flight": 1,
                             "max_publication_lag": 1, "events": 4, "slot_capacity": 1, "published_version": 2,
                             "consumed_version": 2},
        "replay_ingress": {"depth": 2, "slot_rows": 8, "backpressure_wait_s": 0.0, **counts, **dict.fromkeys(zeros, 0)},
        "memory_budget": None,
        "backend_diagnostics": {"available": False, "backend_type": "mujoco", "unavailable_reason": "none declared"},
        "learner_diagnostics": {"available": True, "learner": "SACLearner", "diagnostics": {
            "torch_compile": {"requested": True, "enabled": False, "disable_reason": "forced off on cpu"}}},
        "cuda_process_sharing": {"configured": None, "effective": None},
        "collector": {"pid": 1, "exitcode": 0},
        "shutdown": {"classification": "normal_completion", "owner": "manager", "phase": "finalize",
                     "exception": None, "cleanup": {"errors": []}, **shutdown},
    }  # fmt: skip


def _summary(**top: Any) -> dict[str, Any]:
    doc = {
        "metric_schema_version": 1, "status": "completed", "failure_reason": None, "failure_classification": None,
        "total_env_steps": 32, "iterations": 4, "learner_updates": 3, "duration_s": 1.0, "env_steps_per_s": 32.0,
        "learner_updates_per_s": 3.0, "started_unix_s": 1.0, "finished_unix_s": 2.0, "exit_code": 0,
        "playback": None, "runtime_manifest": _manifest(),
    }  # fmt: skip
    doc.update(top)
    return doc


def test_valid_summary_roundtrip(tmp_path: Path) -> None:
    write_run_summary(tmp_path, _summary())
    assert read_run_summary(tmp_path / "run_summary.json")["total_env_steps"] == 32
    assert [p.name for p in tmp_path.iterdir()] == ["run_summary.json"]  # no temp file left


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"status": "failed"}, "failure_reason"),  # failed needs a reason and classification
        ({"failure_classification": "learner_failure"}, "failure_classification"),
        ({"metric_schema_version": 2}, "metric_schema_version"),
        ({"status": "exploded"}, "status"),
    ],
)
def test_summary_schema_rejects(tmp_path: Path, change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ArtifactError, match=fragment):
        write_run_summary(tmp_path, _summary(**change))
    assert not (tmp_path / "run_summary.json").exists()  # nothing half-written


def test_manifest_schema_rules() -> None:
    validate(_manifest(), RUNTIME_MANIFEST_SCHEMA)
    bad = _manifest()
    bad["backend_diagnostics"] = None  # never a bare null
    with pytest.raises(ArtifactError, match="backend_diagnostics"):
        validate(bad, RUNTIME_MANIFEST_SCHEMA)
    bad = _manifest()
    bad["backend_diagnostics"] = {
        "available": True,
        "backend_type": "mjwarp",
        "diagnostics": {"cuda_graph": {"requested": True, "enabled": False, "disable_reason": None}},
    }  # disabled needs a reason
    with pytest.raises(ArtifactError, match="backend_diagnostics"):
        validate(bad, RUNTIME_MANIFEST_SCHEMA)
    with pytest.raises(ArtifactError, match="classification"):
        validate(_manifest(classification="meltdown"), RUNTIME_MANIFEST_SCHEMA)
    summary = _summary()
    summary["runtime_manifest"]["replay_ingress"].pop("stop_returns")
    with pytest.raises(ArtifactError, match="stop_returns"):
        validate(summary, RUN_SUMMARY_SCHEMA)


@pytest.mark.parametrize(
    "diagnostics",
    [
        None,  # never a bare null
        {"available": True, "learner": "SACLearner", "diagnostics": {}},  # available means something is declared
        {"available": True, "learner": "SACLearner",
         "diagnostics": {"torch_compile": {"requested": True, "enabled": False, "disable_reason": None}}},
        {"available": False, "learner": None, "unavailable_reason": ""},
        {"available": False, "learner": None},
    ],
)  # fmt: skip
def test_manifest_learner_diagnostics_rules(diagnostics: Any) -> None:
    bad = _manifest()
    bad["learner_diagnostics"] = diagnostics
    with pytest.raises(ArtifactError, match="learner_diagnostics"):
        validate(bad, RUNTIME_MANIFEST_SCHEMA)


def test_manifest_requires_learner_diagnostics() -> None:
    bad = _manifest()
    del bad["learner_diagnostics"]
    with pytest.raises(ArtifactError, match="learner_diagnostics"):
        validate(bad, RUNTIME_MANIFEST_SCHEMA)
    unbuilt = _manifest()
    unbuilt["learner_diagnostics"] = {
        "available": False,
        "learner": None,
        "unavailable_reason": "never built",
    }
    validate(unbuilt, RUNTIME_MANIFEST_SCHEMA)


def test_run_config_from_composed_config(tmp_path: Path) -> None:
    cfg = compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path}"])
    doc = build_run_config(cfg.to_dict())
    write_run_config(tmp_path, doc)
    loaded = json.loads((tmp_path / "run_config.json").read_text())
    assert loaded["owner"]["sim"] == "mujoco" and loaded["cuda_process_sharing"] == {"configured": None}


def test_prepare_log_dir_rules(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="absolute"):
        prepare_log_dir("relative/dir")
    with pytest.raises(ArtifactError, match="required"):
        prepare_log_dir(None)
    (tmp_path / "x").write_text("1")
    with pytest.raises(ArtifactError, match="not an empty directory"):
        prepare_log_dir(tmp_path)
    assert prepare_log_dir(tmp_path / "new" / "run").is_dir()


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    atomic_write_json(path, {"a": 1})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["doc.json"]


def test_progress_log_lines_and_checkpoint(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path / "progress.jsonl", clock=lambda: 123.0)
    log.write({"iteration": 1})
    log.write({"iteration": 2})
    log.close()
    lines = [json.loads(x) for x in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert lines == [
        {"schema": 1, "time": 123.0, "iteration": 1},
        {"schema": 1, "time": 123.0, "iteration": 2},
    ]
    import torch

    path = save_checkpoint(tmp_path / "ck", 7, {"w": torch.ones(2)})
    assert path.name == "ckpt_00000007.pt"
    assert torch.load(path)["w"].tolist() == [1.0, 1.0]
