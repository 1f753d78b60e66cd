"""The Markdown job summary: the reason first, failures before passes, and bounded in bytes."""

from __future__ import annotations

import json
from pathlib import Path

from soakbench.harness.ci.cases import CiCase, CiSuite
from soakbench.harness.ci.soak import soak_suite
from soakbench.harness.ci.summary import SUMMARY_BUDGET, render_summary

FIXTURES = Path(__file__).resolve().parents[1] / "soak" / "fixtures"


def test_the_reason_comes_before_the_table_and_failures_before_passes() -> None:
    artifact = json.loads((FIXTURES / "artifact_eventfd_leak.json").read_text())
    text = render_summary([soak_suite(artifact, Path("/r/soak.json"), Path("/r/soak.html"))])
    assert text.startswith("### ❌ soak run flashsac/g1_motion_tracking/mujoco: FAILED")
    assert text.index("**Why:** resource_leak") < text.index("| case |")
    assert text.index("`leak.eventfd` | ❌ fail") < text.index("`criterion.monitor_status` | ✅ pass")
    assert "`/r/soak.html`" in text
    assert "<details><summary>25 passed</summary>" in text


def test_pipes_and_newlines_cannot_break_the_table() -> None:
    suite = CiSuite("s", "t", (CiCase("a", "failed", "x | y\nz"),))
    row = next(line for line in render_summary([suite]).splitlines() if line.startswith("| `a`"))
    assert row == "| `a` | ❌ fail | x \\| y z |"


def test_the_summary_stays_within_its_budget_however_many_cases() -> None:
    cases = tuple(CiCase(f"c{i}", "failed" if i % 3 else "passed", "m" * 400) for i in range(20_000))
    text = render_summary([CiSuite("big", "a huge run", cases, reason="r")])
    assert len(text.encode()) <= SUMMARY_BUDGET
    assert "more cases are in the JUnit XML only" in text
    assert "`c1` | ❌ fail" in text


def test_a_link_to_the_ci_run_closes_the_summary() -> None:
    text = render_summary([CiSuite("s", "t", (CiCase("a", "passed"),))], "https://ci/runs/7")
    assert text.rstrip().endswith("Artifacts of [this run](https://ci/runs/7).")
