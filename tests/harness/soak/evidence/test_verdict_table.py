"""The console verdict: the reason above the table, one line per criterion at 80 columns."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from soakbench.harness.soak.evidence.verdict_table import (
    CONTRACT_FOLD,
    SHORT_NAMES,
    print_verdict,
    short_value,
)
from soakbench.harness.soak.verdicts.evaluation import CRITERIA, RANK_ROWS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _render(artifact: dict[str, Any], width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    print_verdict(artifact, console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_every_criterion_has_a_short_unique_name() -> None:
    assert set(SHORT_NAMES) == set(CRITERIA) | set(RANK_ROWS) | {CONTRACT_FOLD}
    assert len(set(SHORT_NAMES.values())) == len(SHORT_NAMES)
    assert max(len(n) for n in SHORT_NAMES.values()) <= 18


@pytest.mark.parametrize("width", [80, 100, 60])
@pytest.mark.parametrize("fixture", ["artifact_clean.json", "artifact_eventfd_leak.json"])
def test_one_line_per_criterion_within_the_width(fixture: str, width: int) -> None:
    artifact = json.loads((FIXTURES / fixture).read_text())
    lines = _render(artifact, width)
    assert max(len(line) for line in lines) <= width
    for row in artifact["criteria"]:
        short = SHORT_NAMES[row["name"]]
        hits = [line for line in lines if line.split()[1:2] and f" {short} " in line]
        assert len(hits) == 1, (short, lines)
    table_start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["result", "criterion"])
    assert len(lines) - table_start - 1 == len(artifact["criteria"])  # nothing wrapped onto a second line


def test_the_failure_reason_comes_first() -> None:
    lines = _render(json.loads((FIXTURES / "artifact_eventfd_leak.json").read_text()), 80)
    assert lines[0] == "soak run: FAILED (resource_leak)"
    assert lines[1].startswith("why: criterion leak_verdicts failed:")
    leaks = next(line for line in lines if " leaks " in line)
    assert leaks.split()[0] == "FAIL" and "growing: eventfd, fd_total" in leaks


def test_a_passed_run_has_no_reason_line() -> None:
    lines = _render(json.loads((FIXTURES / "artifact_clean.json").read_text()), 80)
    assert lines[0] == "soak run: PASSED" and not any(line.startswith("why:") for line in lines)


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("leak_verdicts", {"growing": [], "verdicts": {}}, "none growing"),
        ("post_shutdown_residual_processes", [], "none"),
        ("post_shutdown_residual_processes", [{"pid": 7}, {"pid": 8}], '2: {"pid":7}'),
        (
            "trend_observation",
            {"rss": "observed (40 samples)", "gpu": "not_observable"},
            "1 of 2 classes observed",
        ),
        ("throughput_drift", {"verdict": "declining", "relative_change_pct": -12.5}, "declining (-12.5 %)"),
        ("run_status", None, "-"),
        ("min_duration", 612.54, "612.5 s"),
        ("exit code", 3, "3"),
    ],
)
def test_short_values(name: str, value: Any, shown: str) -> None:
    assert short_value(name, value) == shown
