"""The typed contract every CI output is written from: a suite of named cases, each passed, failed or
skipped with a one-line message. Pure: builders elsewhere turn a verdict into a ``CiSuite``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["passed", "failed", "skipped"]

#: a failure or skip message is one line a person reads in a CI table; the detail carries the rest
MESSAGE_CHARS = 500
#: the detail of one case (the row's raw value); JUnit consumers cap whole files (GitLab: 30 MB)
DETAIL_CHARS = 16_000


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class CiCase:
    """One row CI tracks over time: ``name`` is stable across runs and unique within its suite."""

    name: str
    outcome: Outcome
    message: str = ""  # why it failed or was skipped; empty when it passed
    detail: str = ""  # what was measured (JSON or text), for the JUnit body
    kind: str = ""  # the failure type (a classification or the row's group)

    def __post_init__(self) -> None:
        if self.outcome != "passed" and not self.message:
            raise ValueError(f"case {self.name!r}: a {self.outcome} case needs a message")


@dataclass(frozen=True)
class CiSuite:
    """One verdict as CI sees it: a title line, the deciding reason, the cases and the suite's facts."""

    name: str
    title: str
    cases: tuple[CiCase, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None  # the failure reason a person reads first; None when it passed
    duration_s: float | None = None
    report: str | None = None  # where the full report is (a path or a URL)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"suite {self.name!r}: duplicate case name {case.name!r}")
            seen.add(case.name)

    @property
    def failed(self) -> tuple[CiCase, ...]:
        return tuple(c for c in self.cases if c.outcome == "failed")

    @property
    def passed(self) -> bool:
        return not self.failed


def counts(suites: Sequence[CiSuite]) -> dict[Outcome, int]:
    """Cases per outcome over every suite."""
    total: dict[Outcome, int] = {"passed": 0, "failed": 0, "skipped": 0}
    for suite in suites:
        for case in suite.cases:
            total[case.outcome] += 1
    return total
