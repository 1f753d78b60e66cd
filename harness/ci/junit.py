"""JUnit XML from CI suites, written with junitparser (one ``<testsuite>`` per suite, one ``<testcase>``
per case) and the project's atomic writer. GitLab and Jenkins show a row per case with its message;
the job's status is still the command's exit code."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.ci.cases import CiCase, CiSuite


def _testcase(case: CiCase, classname: str) -> TestCase:
    testcase = TestCase(case.name, classname, 0.0)
    if case.outcome == "failed":
        failure = Failure(case.message, case.kind or "failure")
        failure.text = case.detail or case.message
        testcase.result = [failure]
    elif case.outcome == "skipped":
        testcase.result = [Skipped(case.message)]
    return testcase


def _testsuite(suite: CiSuite) -> TestSuite:
    testsuite = TestSuite(suite.name)
    for key, value in suite.properties.items():  # properties first, as the JUnit schema orders them
        testsuite.add_property(key, value)
    for case in suite.cases:
        testsuite.add_testcase(_testcase(case, suite.name))
    return testsuite


def junit_document(suites: Sequence[CiSuite]) -> bytes:
    """The JUnit XML document (UTF-8, with its declaration) of ``suites``."""
    xml = JUnitXml()
    for suite in suites:
        xml.add_testsuite(_testsuite(suite))
    xml.update_statistics()  # type: ignore[no-untyped-call]  # junitparser leaves it unannotated; counts every case; it also zeroes the suites' times, so set them after
    for testsuite, suite in zip(xml, suites, strict=True):
        testsuite.time = round(suite.duration_s or 0.0, 3)
    xml.time = round(sum(s.duration_s or 0.0 for s in suites), 3)
    buffer = io.BytesIO()
    xml.write(buffer, pretty=True)
    return buffer.getvalue()


def write_junit(path: Path, suites: Sequence[CiSuite]) -> Path:
    """Write ``suites`` as JUnit XML at ``path`` atomically; returns the path."""
    write_atomic(path, junit_document(suites))
    return path
