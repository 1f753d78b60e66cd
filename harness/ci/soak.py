"""A soak artifact as a CI suite: a case per pass-table row (``criterion.<row>``) and one per resource
class's leak verdict (``leak.<class>``). Pure: artifact in, suite out; names are stable across runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soakbench.harness.ci.cases import DETAIL_CHARS, MESSAGE_CHARS, CiCase, CiSuite, clip
from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.gpu import throttle_text
from soakbench.harness.soak.verdicts.reasons import deciding_row, row_reason

_NEEDS_SUMMARY = "needs a run_summary, which `soak monitor` judges only with --run-contract"


def suite_name(artifact: Mapping[str, Any]) -> str:
    """``soak.run.<algo>.<task>.<sim>`` for the owner-routed trainer, ``soak.monitor`` otherwise."""
    route = artifact.get("run_settings") or {}
    if artifact["mode"] == "run" and route:
        return f"soak.run.{route['algo']}.{route['task']}.{route['sim']}"
    return f"soak.{artifact['mode']}"


def suite_title(artifact: Mapping[str, Any]) -> str:
    route = artifact.get("run_settings") or {}
    if artifact["mode"] == "run" and route:
        return f"soak run {route['algo']}/{route['task']}/{route['sim']}"
    return "soak monitor " + clip(" ".join(str(a) for a in artifact.get("command", [])), 60)


def _detail(row: Mapping[str, Any]) -> str:
    text = json.dumps({"expected": row["expected"], "value": row["value"]}, default=str)
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def skip_reason(row: Mapping[str, Any], mode: str) -> str:
    """Why a ``not_applicable`` row does not apply to this run."""
    value = row["value"]
    if row["name"] == "throughput_drift" and isinstance(value, Mapping):
        return (
            f"reported, not gated (--fail-on-throughput-drift gates it): {value.get('verdict')}: "
            f"{value.get('reason')}"
        )
    if row["name"] == "gpu_throttle" and isinstance(value, Mapping):
        return f"reported, not gated (--fail-on-gpu-throttle gates it): {throttle_text(value)}"
    if isinstance(value, str) and value:
        return value
    if mode == "monitor" and value is None:
        return _NEEDS_SUMMARY
    return "does not apply to this run"


def criterion_case(row: Mapping[str, Any], artifact: Mapping[str, Any], deciding: str | None) -> CiCase:
    """The case of one pass-table row; the row that decided the failure carries the classification."""
    name = f"criterion.{row['name']}"
    if row["result"] == "pass":
        return CiCase(name, "passed", detail=_detail(row))
    if row["result"] == "not_applicable":
        return CiCase(name, "skipped", clip(skip_reason(row, artifact["mode"]), MESSAGE_CHARS))
    criterion = Criterion(row["name"], row["expected"], row["value"], row["result"])
    if row["result"] == "inconclusive":  # not a pass: a CI job reads it as a failure of its own kind
        return CiCase(
            name, "failed", clip(row_reason(criterion), MESSAGE_CHARS), _detail(row), "inconclusive"
        )
    kind = artifact["failure_classification"] if row["name"] == deciding else row["name"]
    return CiCase(name, "failed", clip(row_reason(criterion), MESSAGE_CHARS), _detail(row), str(kind))


def leak_cases(artifact: Mapping[str, Any]) -> list[CiCase]:
    """A case per resource class: growing fails with the trend's reason, bounded passes, a class without
    a verdict is skipped with why (too few samples, or not observable here)."""
    summary = artifact.get("resource_summary") or {}
    trends = summary.get("trends") or {}
    observed = _row_value(artifact, "trend_observation")
    cases: list[CiCase] = []
    for cls, verdict in (summary.get("leak_verdicts") or {}).items():
        trend = trends.get(cls) or {}
        reason = str(trend.get("reason") or verdict)
        name = f"leak.{cls}"
        if verdict == "growing":
            detail = json.dumps({k: trend.get(k) for k in ("slope_per_hour", "growth_over_window", "unit")})
            cases.append(CiCase(name, "failed", clip(f"{cls} growing: {reason}", MESSAGE_CHARS), detail,
                                "resource_leak"))  # fmt: skip
        elif verdict == "bounded":
            cases.append(CiCase(name, "passed", detail=reason))
        else:
            why = observed.get(cls) if isinstance(observed, Mapping) else None
            cases.append(CiCase(name, "skipped", clip(f"{verdict}: {why or reason}", MESSAGE_CHARS)))
    return cases


def _row_value(artifact: Mapping[str, Any], name: str) -> Any:
    return next((r["value"] for r in artifact.get("criteria", []) if r["name"] == name), None)


def _first_failed(artifact: Mapping[str, Any]) -> str | None:
    failed = [r["name"] for r in artifact.get("criteria", []) if r["result"] == "fail"]
    return deciding_row(artifact.get("failure_reason"), failed)


def properties(artifact: Mapping[str, Any], artifact_path: Path) -> dict[str, str]:
    """The suite's facts: where the run came from and what was judged."""
    source = (artifact.get("context") or {}).get("source") or {}
    host = (artifact.get("context") or {}).get("host") or {}
    return {
        "commit": str(source.get("commit")),
        "dirty": str(source.get("dirty")).lower(),
        "host": str(host.get("hostname")),
        "artifact": str(artifact_path),
        "schema_version": str(artifact["artifact_schema_version"]),
        "status": str(artifact["status"]),
        "failure_classification": str(artifact.get("failure_classification")),
    }


def soak_suite(artifact: Mapping[str, Any], artifact_path: Path, report: Path | None = None) -> CiSuite:
    """The CI suite of one soak artifact."""
    deciding = _first_failed(artifact)
    cases = [criterion_case(row, artifact, deciding) for row in artifact.get("criteria", [])]
    return CiSuite(
        name=suite_name(artifact),
        title=suite_title(artifact),
        cases=(*cases, *leak_cases(artifact)),
        properties=properties(artifact, artifact_path),
        reason=None if artifact["status"] == "passed" else _headline(artifact),
        duration_s=(artifact.get("timing") or {}).get("duration_s"),
        report=None if report is None else str(report),
    )


def _headline(artifact: Mapping[str, Any]) -> str:
    kind = artifact.get("failure_classification") or artifact.get("status")
    return f"{kind}: {artifact.get('failure_reason')}"
