"""A comparison report (``probe compare``, ``soak compare``) as a CI suite: a case per measure, failed
when that measure is a regression the command gates on, skipped when the data could not decide.
Pure: report in, suite out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from soakbench.harness.ci.cases import MESSAGE_CHARS, CiCase, CiSuite, clip

Row = Mapping[str, Any]


def _change(row: Row) -> str:
    ratio, low, high = row.get("ratio"), row.get("ci_low"), row.get("ci_high")
    if ratio is None:
        return f"{row.get('base_state') or '-'} -> {row.get('new_state') or '-'}"
    interval = "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"
    return f"new/base {ratio:.3f}{interval}"


def measure_case(name: str, row: Row, gated: bool) -> CiCase:
    """One measure's case: ``slower`` on a gated measure fails; ``inconclusive`` is skipped with why."""
    verdict = str(row["verdict"])
    said = f"{verdict}: {_change(row)}" + (f"; {row['note']}" if row.get("note") else "")
    if verdict == "slower" and gated:
        return CiCase(name, "failed", clip(f"regression: {said}", MESSAGE_CHARS), said, "regression")
    if verdict == "inconclusive":
        return CiCase(name, "skipped", clip(said, MESSAGE_CHARS))
    if verdict == "slower":
        return CiCase(name, "skipped", clip(f"not gated: {said}", MESSAGE_CHARS))
    return CiCase(name, "passed", detail=said)


def compare_suite(
    report: Mapping[str, Any],
    *,
    tool: str,
    case_name: Callable[[Row], str],
    gated: Callable[[Row], bool] = lambda row: True,
) -> CiSuite:
    """The CI suite of one comparison report (``tool``: ``probe.compare`` or ``soak.compare``)."""
    cases = tuple(measure_case(case_name(row), row, gated(row)) for row in report["measures"])
    failed = [c for c in cases if c.outcome == "failed"]
    reason = None
    if failed:
        reason = f"{len(failed)} measure(s) regressed: " + "; ".join(
            f"{c.name} {c.message}" for c in failed[:3]
        )
    base, new = report["base"], report["new"]
    return CiSuite(
        name=tool,
        title=f"{tool.replace('.', ' ')} at a {report['threshold']:.0%} minimum effect",
        cases=cases,
        properties={
            "base": str(base.get("path")),
            "new": str(new.get("path")),
            "base_commit": str(base.get("commit")),
            "commit": str(new.get("commit")),
            "cross_host": str(report["cross_host"]).lower(),
            "schema_version": str(report["schema_version"]),
            "method": clip(str(report["method"]), MESSAGE_CHARS),
        },
        reason=reason,
    )
