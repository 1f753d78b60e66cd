"""The trainer's contract on the consumer side: a stand-in trainer (a real process writing progress and
run_summary.json) replays one mutation per rule under `soak monitor --run-contract`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.verdicts.gpu import GPU_ROWS
from tests.harness.soak._soakrun import soak_monitor

pytestmark = [pytest.mark.soak, pytest.mark.linux_only]

RI = "runtime_manifest.replay_ingress"
IF = "runtime_manifest.inference_flight"
SD = "runtime_manifest.shutdown"
RUN_S = "4"


def contract_run(tmp: Path, how: str, changes: dict[str, Any] | None = None, code: int = 0) -> Any:
    extra = [json.dumps(changes)] if changes else []
    return soak_monitor(tmp, "contract_trainer.py", RUN_S, str(code), how, *extra, run_contract=True)


def test_the_honest_summary_passes(tmp_path: Path) -> None:
    outcome = contract_run(tmp_path, "write")
    art = outcome.artifact
    assert outcome.returncode == 0, art["failure_reason"]
    assert art["run_contract"] is True and art["run_summary"]["metric_schema_version"] == 1
    ungated = ("throughput_drift", "survival", *GPU_ROWS)  # no GPU without NVML; no --must-survive target
    assert {c["result"] for c in art["criteria"] if c["name"] not in ungated} == {"pass"}
    assert {c["result"] for c in art["criteria"] if c["name"] in GPU_ROWS} <= {"pass", "not_applicable"}
    assert outcome.criterion("throughput_drift")["result"] == "not_applicable"  # judged only on request
    assert len(art["samples_sha256"]) == 64


@pytest.mark.parametrize(
    ("changes", "code", "classification", "named"),
    [
        ({"metric_schema_version": "1"}, 0, "schema_violation", "metric_schema_version"),
        ({"runtime_manifest.schema_version": 2}, 0, "schema_violation", "runtime_manifest.schema_version"),
        ({f"{RI}.final_occupancy": 1}, 0, "run_contract_violation", "replay_final_occupancy"),
        ({f"{RI}.dropped_batches": 3, f"{RI}.early_returns": 3}, 0, "run_contract_violation", "replay_no_drops"),
        ({f"{RI}.high_water_occupancy": 9}, 0, "run_contract_violation", "high_water_occupancy = 9"),
        ({f"{IF}.max_in_flight": 9}, 0, "run_contract_violation", "max_in_flight = 9"),
        ({"total_env_steps": 1228801}, 0, "run_contract_violation", "replay_published_sequence"),
        ({f"{SD}.classification": "fine"}, 0, "shutdown_contract_violation", "classification"),
        ({f"{SD}.phase": ""}, 0, "shutdown_contract_violation", "phase"),
        ({f"{SD}.exception": "boom"}, 0, "shutdown_contract_violation", "exception"),
        ({f"{SD}.cleanup": {"errors": "none"}}, 0, "shutdown_contract_violation", "cleanup.errors"),
        ({}, 1, "shutdown_contract_violation", "cannot claim normal_completion"),
    ],
)  # fmt: skip
def test_each_broken_rule_fails_with_its_class(
    tmp_path: Path, changes: dict[str, Any], code: int, classification: str, named: str
) -> None:
    outcome = contract_run(tmp_path, "write", changes, code)
    art = outcome.artifact
    assert outcome.returncode == 1
    assert art["failure_classification"] == classification, art["failure_reason"]
    assert named in art["failure_reason"]


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("missing", "does not exist"),
        ("truncated", "unreadable"),
        ("binary", "unreadable"),
        ("directory", "is a directory"),
        ("symlink_out", "outside the log dir"),
    ],
)
def test_an_unreadable_summary_is_classified_never_a_traceback(tmp_path: Path, how: str, said: str) -> None:
    outcome = contract_run(tmp_path, how)
    art = outcome.artifact
    assert outcome.returncode == 1 and "Traceback" not in outcome.stderr
    assert art["failure_classification"] == "run_summary_missing"
    assert said in art["failure_reason"] and art["run_summary"] is None


def test_a_three_second_run_is_insufficient_observation(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "healthy_plateau.py", "3", trend_samples=30)
    art = outcome.artifact
    assert outcome.returncode == 1
    assert art["failure_classification"] == "insufficient_observation", art["failure_reason"]
    observation = art["resource_summary"]["observation"]
    assert observation["min_trend_samples"] == 30
    assert {e["status"] for e in observation["classes"].values()} <= {"insufficient_data", "not_observable"}
