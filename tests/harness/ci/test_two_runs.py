"""A comparison report as a CI suite: a gated slower measure fails, inconclusive is skipped with why."""

from __future__ import annotations

from typing import Any

from soakbench.harness.ci.two_runs import compare_suite, measure_case


def _row(measure: str, verdict: str, **extra: Any) -> dict[str, Any]:
    return {"measure": measure, "verdict": verdict, "ratio": 0.8, "ci_low": 0.75, "ci_high": 0.85, **extra}


def _report(*rows: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "threshold": 0.05,
        "cross_host": False,
        "method": "two-level bootstrap",
        "base": {"path": "/a.json", "commit": "aaa"},
        "new": {"path": "/b.json", "commit": "bbb"},
        "measures": list(rows),
    }


def test_a_gated_slower_measure_fails_with_its_interval() -> None:
    case = measure_case("env_steps_per_s", _row("env_steps_per_s", "slower"), gated=True)
    assert case.outcome == "failed" and case.kind == "regression"
    assert case.message == "regression: slower: new/base 0.800 [0.750, 0.850]"


def test_an_ungated_slower_measure_is_skipped_not_failed() -> None:
    case = measure_case("mujoco.phase.obs", _row("x", "slower"), gated=False)
    assert case.outcome == "skipped" and case.message.startswith("not gated: slower")


def test_inconclusive_is_skipped_with_the_note() -> None:
    case = measure_case("duration_s", _row("d", "inconclusive", note="noise too large"), gated=True)
    assert case.outcome == "skipped" and case.message.endswith("; noise too large")


def test_the_suite_names_cases_by_measure_and_states_the_regression() -> None:
    report = _report(_row("env_steps_per_s", "no_change"), _row("slope.rss", "slower", ratio=None))
    suite = compare_suite(report, tool="soak.compare", case_name=lambda r: str(r["measure"]))
    assert [c.name for c in suite.cases] == ["env_steps_per_s", "slope.rss"]
    assert not suite.passed and suite.reason is not None and suite.reason.startswith("1 measure(s) regressed")
    assert suite.properties["base_commit"] == "aaa" and suite.properties["commit"] == "bbb"
    assert suite.title == "soak compare at a 5% minimum effect"


def test_no_regression_is_a_passing_suite() -> None:
    suite = compare_suite(
        _report(_row("a", "faster"), _row("b", "no_change")), tool="t", case_name=lambda r: r["measure"]
    )
    assert suite.passed and suite.reason is None
