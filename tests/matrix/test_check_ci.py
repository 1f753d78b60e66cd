"""`matrix check --junit-xml/--summary-md`: a case per generated output and one for the test bindings,
read back with ElementTree."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from soakbench.matrix.publishing.ci import bindings_case, check_suite, output_case
from tests.matrix.conftest import Invoke


def _cases(path: Path) -> dict[str, str]:
    """case name -> passed | failed"""
    root = ET.parse(path).getroot()
    return {
        str(c.get("name")): "failed" if c.find("failure") is not None else "passed"
        for c in root.iter("testcase")
    }


def test_output_and_binding_cases() -> None:
    assert output_case("docs/a.md", []).outcome == "passed"
    failed = output_case("docs/a.md", ["docs/a.md: differs (2 changed lines)", "    -x", "    +y"])
    assert failed.outcome == "failed" and failed.message.startswith("docs/a.md: differs (2 changed lines);")
    assert "+y" in failed.detail
    bindings = bindings_case(["cell sac/x/mujoco has no test", "another"])
    assert bindings.outcome == "failed" and bindings.message.startswith("2 disagreement(s)")
    suite = check_suite({"b.json": [], "a.md": ["a.md: missing"]}, [])
    assert [c.name for c in suite.cases] == ["generated.a.md", "generated.b.json", "test_bindings"]
    assert suite.reason is not None and suite.reason.startswith("a.md: missing")


def test_a_hand_edit_is_a_failed_case(
    repo: Path, run_matrix: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert run_matrix("generate").exit_code == 0
    junit, summary = tmp_path / "check.xml", tmp_path / "check.md"
    assert run_matrix("check", "--junit-xml", str(junit), "--summary-md", str(summary)).exit_code == 0
    cases = _cases(junit)
    assert cases["test_bindings"] == "passed" and "generated.docs/support-matrix.md" in cases
    assert set(cases.values()) == {"passed"}
    page = repo / "docs" / "support-matrix.md"
    page.write_text(page.read_text().replace("**Configured**", "**Recommended**", 1))
    assert run_matrix("check", "--junit-xml", str(junit), "--summary-md", str(summary)).exit_code == 1
    cases = _cases(junit)
    assert cases["generated.docs/support-matrix.md"] == "failed"
    assert cases["generated.reports/support-matrix.json"] == "passed"
    assert "**Why:** docs/support-matrix.md: differs" in summary.read_text()


def test_a_bad_junit_path_is_refused(run_matrix: Invoke, tmp_path: Path) -> None:
    result = run_matrix("check", "--junit-xml", str(tmp_path / "none" / "x.xml"))
    assert result.exit_code == 2 and "--junit-xml: parent directory" in result.output
