"""The CI contract and the soak suite built from an artifact: pure, from the committed fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.ci.cases import CiCase, CiSuite, clip, counts
from soakbench.harness.ci.soak import skip_reason, soak_suite

FIXTURES = Path(__file__).resolve().parents[1] / "soak" / "fixtures"


def _artifact(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def _case(suite: CiSuite, name: str) -> CiCase:
    return next(c for c in suite.cases if c.name == name)


def test_a_suite_refuses_duplicate_case_names() -> None:
    with pytest.raises(ValueError, match="duplicate case name 'a'"):
        CiSuite("s", "t", (CiCase("a", "passed"), CiCase("a", "passed")))


def test_a_failed_or_skipped_case_needs_a_message() -> None:
    with pytest.raises(ValueError, match="needs a message"):
        CiCase("a", "failed")


def test_clip_keeps_one_line_within_the_limit() -> None:
    assert clip("a\nb   c", 10) == "a b c"
    assert clip("x" * 20, 10) == "x" * 9 + "…"


def test_a_clean_soak_has_no_failure() -> None:
    suite = soak_suite(_artifact("artifact_clean.json"), Path("/r/soak.json"))
    assert suite.passed and suite.reason is None
    assert counts([suite])["failed"] == 0
    assert _case(suite, "leak.eventfd").outcome == "passed"
    assert suite.properties["status"] == "passed"


def test_a_leaking_soak_fails_the_leak_row_and_names_the_class() -> None:
    artifact = _artifact("artifact_eventfd_leak.json")
    suite = soak_suite(artifact, Path("/r/soak.json"), Path("/r/soak.html"))
    assert {c.name for c in suite.failed} == {"criterion.leak_verdicts", "leak.eventfd", "leak.fd_total"}
    row = _case(suite, "criterion.leak_verdicts")
    assert "eventfd" in row.message and row.kind == "resource_leak"
    assert _case(suite, "leak.eventfd").message.startswith("eventfd growing: sustained growth")
    assert suite.reason is not None and suite.reason.startswith("resource_leak: criterion leak_verdicts")
    assert suite.report == "/r/soak.html"


def test_rows_that_do_not_apply_are_skipped_with_why() -> None:
    suite = soak_suite(_artifact("artifact_eventfd_leak.json"), Path("/r/soak.json"))
    drift = _case(suite, "criterion.throughput_drift")
    assert drift.outcome == "skipped" and "--fail-on-throughput-drift" in drift.message
    gpu = _case(suite, "leak.gpu_memory")
    assert gpu.outcome == "skipped" and "not_observable" in gpu.message


def test_a_monitor_soak_skips_the_summary_rows_naming_the_flag() -> None:
    artifact = _artifact("artifact_clean.json")
    artifact["mode"] = "monitor"
    for row in artifact["criteria"]:
        if row["name"] == "run_status":
            row["value"], row["result"] = None, "not_applicable"
    suite = soak_suite(artifact, Path("/r/soak.json"))
    assert suite.name == "soak.monitor"
    assert "--run-contract" in _case(suite, "criterion.run_status").message


def test_case_names_are_stable_across_runs_and_outcomes() -> None:
    clean = soak_suite(_artifact("artifact_clean.json"), Path("/a.json"))
    leak = soak_suite(_artifact("artifact_eventfd_leak.json"), Path("/b.json"))
    assert [c.name for c in clean.cases] == [c.name for c in leak.cases]
    assert clean.name == leak.name == "soak.run.flashsac.g1_motion_tracking.mujoco"


def test_properties_name_the_source_and_schema() -> None:
    props = soak_suite(_artifact("artifact_clean.json"), Path("/r/soak.json")).properties
    assert props["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert props["dirty"] == "false" and props["host"] == "ci-runner"
    assert props["artifact"] == "/r/soak.json" and props["schema_version"] == "0.3.0"


def test_a_reported_gpu_throttle_row_says_it_is_not_gated() -> None:
    value = {"share": 0.25, "samples_judged": 8, "samples_throttled": 2, "reasons": {"HwThermal": 2}}
    assert skip_reason({"name": "gpu_throttle", "value": value}, "monitor") == (
        "reported, not gated (--fail-on-gpu-throttle gates it): GPU clocks held down in 25.0 % of samples "
        "(2 of 8): HwThermal"
    )
