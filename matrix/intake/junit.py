"""JUnit XML (pytest ``--junitxml`` + ``-p soakbench.matrix.pytest_cell``) -> normalized JUnit evidence summary.

The summary is what gets filed: small, deterministic (no host names, no durations), schema-checked
against ``schemas/junit-summary-1.schema.json``. Cell bindings come from testcase properties named
``cell`` (``algo/task/backend`` for one rank, ``algo/task/backend/ranks=N`` for a job of N ranks); run
facts from suite properties named ``matrix.*``.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from typing import Any

from soakbench.foundation.cells import CELL_FORMAT, parse_cell
from soakbench.matrix.model import (
    CELL_PROPERTY,
    LANES,
    PLATFORMS,
    SUITE_PREFIX,
    Binding,
    MatrixInputError,
    cell_property,
)

JUNIT_SUMMARY_VERSION = 1
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "errors": 3}
__all__ = ["cell_property", "summarize_junit"]


def _properties(node: ET.Element) -> list[tuple[str, str]]:
    props = node.find("properties")
    if props is None:
        return []
    return [(p.get("name", ""), p.get("value", "")) for p in props.findall("property")]


def _outcome(case: ET.Element) -> str:
    if case.find("error") is not None:
        return "errors"
    if case.find("failure") is not None:
        return "failed"
    if case.find("skipped") is not None:
        return "skipped"
    return "passed"


def _choose(display: str, name: str, recorded: str | None, flag: str | None, allowed: tuple[str, ...]) -> str:
    if recorded and flag and recorded != flag:
        raise MatrixInputError(
            display, f"property {SUITE_PREFIX}{name}", f"records {recorded!r} but --{name} {flag!r} was given"
        )
    value = flag or recorded
    if not value:
        raise MatrixInputError(
            display, f"property {SUITE_PREFIX}{name}", f"missing; pass --{name} ({', '.join(allowed)})"
        )
    if value not in allowed:
        raise MatrixInputError(display, f"{name}", f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")
    return value


def _bool(display: str, name: str, raw: str | None) -> bool:
    if raw not in ("true", "false"):
        raise MatrixInputError(
            display,
            f"property {SUITE_PREFIX}{name}",
            f"must be true or false, got {raw!r}; run pytest with -p soakbench.matrix.pytest_cell",
        )
    return raw == "true"


def summarize_junit(
    data: bytes,
    display: str,
    *,
    platform: str | None = None,
    lane: str | None = None,
    platforms: tuple[str, ...] = PLATFORMS,
    lanes: tuple[str, ...] = LANES,
) -> dict[str, Any]:
    """Parse JUnit XML bytes into the summary document (pure; raises MatrixInputError naming display).
    Its platform and lane must be the inventory's (``platforms``, ``lanes``: this runtime's by default)."""
    suites = _suites(data, display)
    for position, suite in enumerate(suites):
        _check_declared_counts(suite, position, display)
    facts = _suite_facts(suites)
    commit = facts.get("commit") or ""
    if not commit:
        raise MatrixInputError(
            display,
            f"property {SUITE_PREFIX}commit",
            "missing; run pytest with -p soakbench.matrix.pytest_cell in a git checkout",
        )
    outcomes, bindings = _outcomes_and_bindings(suites, display)
    totals = {k: 0 for k in _RANK}
    for outcome in outcomes.values():
        totals[outcome] += 1
    return {
        "schema_version": JUNIT_SUMMARY_VERSION,
        "kind": "junit-summary",
        "source": {
            "commit": commit,
            "dirty": _bool(display, "dirty", facts.get("dirty")),
            "worktree_digest": facts.get("worktree_digest") or None,
            **({"python": facts["python"]} if facts.get("python") else {}),
            **_loaded(display, facts.get("distributions")),
        },
        "platform": _choose(display, "platform", facts.get("platform"), platform, platforms),
        "lane": _choose(display, "lane", facts.get("lane"), lane, lanes),
        "system": facts.get("system") or None,
        "gpu_available": _bool(display, "gpu_available", facts.get("gpu_available")),
        "timestamp": suites[0].get("timestamp"),
        "totals": {"tests": len(outcomes), **totals},
        "cells": _cell_entries(outcomes, bindings),
        "source_sha256": hashlib.sha256(data).hexdigest(),
    }


def _loaded(display: str, raw: str | None) -> dict[str, Any]:
    """``{"distributions": {name: version}}`` from the suite property the cell plugin writes at the end
    of the session (what the tests loaded), or nothing when the lane did not record it."""
    if not raw:
        return {}
    try:
        loaded = json.loads(raw)
    except ValueError:
        loaded = None
    if not isinstance(loaded, dict) or not all(isinstance(v, str) and v for v in loaded.values()):
        raise MatrixInputError(
            display, f"property {SUITE_PREFIX}distributions", "must be a JSON object of name -> version"
        )
    return {"distributions": dict(sorted(loaded.items()))}


def _suites(data: bytes, display: str) -> list[ET.Element]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise MatrixInputError(display, "$", f"not well-formed XML: {exc}") from None
    suites = (
        [root] if root.tag == "testsuite" else root.findall("testsuite") if root.tag == "testsuites" else []
    )
    if not suites:
        raise MatrixInputError(display, "$", f"root element <{root.tag}> is not <testsuites>/<testsuite>")
    return suites


#: testsuite attribute -> the testcase child element it counts (None: every testcase)
_DECLARED = {"tests": None, "failures": "failure", "errors": "error", "skipped": "skipped"}


def _check_declared_counts(suite: ET.Element, position: int, display: str) -> None:
    """A suite's declared ``tests/failures/errors/skipped`` must be what its testcases show; counts are
    always recomputed from the testcases, so a hand-edited total never reaches the summary."""
    cases = list(suite.iter("testcase"))
    for attribute, child in _DECLARED.items():
        declared = suite.get(attribute)
        if declared is None:
            continue
        found = len(cases) if child is None else sum(1 for c in cases if c.find(child) is not None)
        if declared.strip() != str(found):
            raise MatrixInputError(
                display,
                f"testsuite[{position}] @{attribute}",
                f"declares {attribute}={declared} but its testcases give {found}",
            )


def _suite_facts(suites: list[ET.Element]) -> dict[str, str]:
    """The ``matrix.*`` suite properties, prefix stripped (a later suite wins)."""
    facts: dict[str, str] = {}
    for suite in suites:
        for name, value in _properties(suite):
            if name.startswith(SUITE_PREFIX):
                facts[name[len(SUITE_PREFIX) :]] = value
    return facts


def _outcomes_and_bindings(
    suites: list[ET.Element], display: str
) -> tuple[dict[str, str], dict[str, set[Binding]]]:
    """Worst outcome per test id (a teardown error after a pass makes the test an error) and the cells
    each test is bound to."""
    outcomes: dict[str, str] = {}
    bindings: dict[str, set[Binding]] = {}
    for suite in suites:
        for case in suite.iter("testcase"):
            test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
            outcome = _outcome(case)
            if _RANK[outcome] >= _RANK.get(outcomes.get(test_id, "passed"), 0):
                outcomes[test_id] = outcome
            for name, value in _properties(case):
                if name == CELL_PROPERTY:
                    bindings.setdefault(test_id, set()).add(_cell(display, test_id, value))
    return outcomes, bindings


def _cell(display: str, test_id: str, value: str) -> Binding:
    parsed = parse_cell(value)
    if parsed is None:
        raise MatrixInputError(
            display, f"testcase {test_id} property cell", f"{value!r} is not of the form {CELL_FORMAT}"
        )
    return parsed


def _entry(cell: Binding) -> dict[str, Any]:
    """A new summary entry of one bound cell (``ranks`` only for a job of several ranks)."""
    algo, task, backend, ranks = cell
    return {
        "algo": algo,
        "task": task,
        "backend": backend,
        **({"ranks": ranks} if ranks > 1 else {}),
        **{k: 0 for k in _RANK},
        "tests": [],
    }


def _cell_entries(outcomes: dict[str, str], bindings: dict[str, set[Binding]]) -> list[dict[str, Any]]:
    """Per bound cell, sorted: its outcome counts and test ids."""
    cells: dict[Binding, dict[str, Any]] = {}
    for test_id, bound in bindings.items():
        for cell in bound:
            entry = cells.setdefault(cell, _entry(cell))
            entry[outcomes[test_id]] += 1
            entry["tests"].append(test_id)
    for entry in cells.values():
        entry["tests"].sort()
    return [cells[k] for k in sorted(cells)]
