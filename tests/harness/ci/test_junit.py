"""JUnit XML written with junitparser, read back with the standard library's ElementTree."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from soakbench.harness.ci.cases import CiCase, CiSuite
from soakbench.harness.ci.junit import write_junit
from soakbench.harness.ci.soak import soak_suite

FIXTURES = Path(__file__).resolve().parents[1] / "soak" / "fixtures"


def test_counts_messages_skips_and_properties_read_back(tmp_path: Path) -> None:
    suite = CiSuite(
        "tool.check",
        "a check",
        (
            CiCase("ok", "passed"),
            CiCase("bad", "failed", 'went <wrong> & "badly"', '{"x": 1}', "resource_leak"),
            CiCase("n_a", "skipped", "does not apply"),
        ),
        {"commit": "abc", "dirty": "false"},
        duration_s=12.5,
    )
    path = write_junit(tmp_path / "junit.xml", [suite])
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (testsuite,) = root.findall("testsuite")
    assert testsuite.get("name") == "tool.check"
    assert (testsuite.get("tests"), testsuite.get("failures"), testsuite.get("skipped")) == ("3", "1", "1")
    assert float(testsuite.get("time") or 0) == 12.5
    props = {p.get("name"): p.get("value") for p in testsuite.iter("property")}
    assert props == {"commit": "abc", "dirty": "false"}
    failure = testsuite.find("testcase[@name='bad']/failure")
    assert failure is not None
    assert failure.get("message") == 'went <wrong> & "badly"' and failure.get("type") == "resource_leak"
    assert json.loads(failure.text or "") == {"x": 1}
    skipped = testsuite.find("testcase[@name='n_a']/skipped")
    assert skipped is not None and skipped.get("message") == "does not apply"
    assert testsuite.find("testcase[@name='ok']/failure") is None


def test_a_leaking_soak_fixture_gives_the_leak_as_a_failure(tmp_path: Path) -> None:
    artifact = json.loads((FIXTURES / "artifact_eventfd_leak.json").read_text())
    path = write_junit(tmp_path / "soak.xml", [soak_suite(artifact, tmp_path / "soak.json")])
    root = ET.parse(path).getroot()
    failed = {c.get("name") for c in root.iter("testcase") if c.find("failure") is not None}
    assert failed == {"criterion.leak_verdicts", "leak.eventfd", "leak.fd_total"}
    names = [c.get("name") for c in root.iter("testcase")]
    assert len(names) == len(set(names))
