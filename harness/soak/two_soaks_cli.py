"""``soak compare BASE NEW``: load two soak artifacts and their samples, refuse what cannot be compared,
print the verdict table, write the JSON report when asked.

    soak compare BASE.json NEW.json [--threshold 0.05] [--must-survive 72h] [--allow-cross-host]
                 [--fail-on-regression] [--json] [--json-file /abs/report.json] [--junit-xml PATH]
                 [--summary-md PATH]

``--json`` prints the report (one JSON document) on stdout and nothing else there; the table and every
message go to stderr. ``--json-file`` writes the same report to a file.

Exit codes: 0 compared; 1 ``--fail-on-regression`` and a measure is ``slower`` (a resource or the
duration worse, or a class that fails the survival target in the new soak only), or the report failed its own schema (nothing written); 2 bad input (unreadable or
schema-invalid artifact, a samples file missing or not the one the artifact's sha256 names, a different
workload, a different host without ``--allow-cross-host``, a bad flag), nothing written.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import sorted_errors
from soakbench.harness.ci.cases import CiSuite
from soakbench.harness.ci.outputs import CiOutputError, CiOutputs
from soakbench.harness.ci.two_runs import compare_suite
from soakbench.harness.soak.evidence.artifact import ArtifactError, load_artifact
from soakbench.harness.soak.evidence.report import locate_samples, read_samples
from soakbench.harness.soak.verdicts.two_soaks import (
    LISTED_FIELDS,
    METHOD,
    REPORT_SCHEMA,
    REPORT_SCHEMA_VERSION,
    SoakCompareError,
    compare_runs,
    survival_target,
    workload_refusal,
)
from soakbench.harness.two_runs.fields import host_differences, host_identity, setting_differences
from soakbench.harness.two_runs.output_path import OutputPathError, json_output_path

VERDICT_STYLE = {"faster": "green", "slower": "bold red", "no_change": "dim", "inconclusive": "yellow"}
# A resource or the duration is lower-is-better: its `slower` is shown as what it means.
RESOURCE_WORDS = {"slower": "worse", "faster": "better"}


def load_run(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The artifact and its samples; SoakCompareError when the samples are missing or not the recorded
    ones (the verdicts are recomputed from them, so an artifact without them cannot be compared)."""
    artifact = load_artifact(path)
    found, _note = locate_samples(path, str(artifact["samples_path"]))
    if found is None:
        raise SoakCompareError(
            "samples_path",
            f"{path}: the samples file {artifact['samples_path']} is neither at that path nor beside the "
            "artifact; every measure is recomputed from it, so this soak cannot be compared",
        )
    digest = artifact.get("samples_sha256")
    if digest is not None:
        actual = hashlib.sha256(found.read_bytes()).hexdigest()
        if actual != digest:
            raise SoakCompareError(
                "samples_sha256", f"{path}: {found} has sha256 {actual}, the artifact records {digest}"
            )
    samples, _truncated = read_samples(found)
    return artifact, samples


def compare_soaks(
    runs: tuple[Mapping[str, Any], Mapping[str, Any]],
    samples: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    *,
    threshold: float,
    allow_cross_host: bool,
    must_survive_s: float | None = None,
) -> dict[str, Any]:
    """The comparison report (schema ``soak-compare-2``); raises SoakCompareError. ``must_survive_s``:
    the survival target both soaks are judged against (None: the new soak's, else the base's)."""
    base, new = runs
    refusal = workload_refusal(base, new)
    if refusal:
        raise refusal
    hosts = host_differences(base, new)
    if hosts and not allow_cross_host:
        raise SoakCompareError(
            "context.host",
            "different hosts (" + "; ".join(hosts) + "); pass --allow-cross-host to compare anyway",
        )
    target_s = survival_target(runs, must_survive_s)
    try:
        rows = compare_runs(runs, samples, threshold, target_s=target_s)
    except (ValueError, TypeError, KeyError) as exc:  # a sample the reader's shape check let through
        raise SoakCompareError("samples_path", f"cannot recompute the measures: {exc!r}") from None
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "soakbench.soak-compare",
        "base": _identity(base),
        "new": _identity(new),
        "threshold": threshold,
        "method": METHOD,
        "cross_host": bool(hosts),
        "host_differences": hosts,
        "setting_differences": setting_differences(base, new, LISTED_FIELDS),
        "measures": rows,
        "turned_rising": [r["measure"].removeprefix("slope.") for r in rows if _turned_rising(r)],
        "survival_target_seconds": target_s,
        "turned_failing": [r["measure"].removeprefix("survival.") for r in rows if _turned_failing(r)],
        "regression": any(r["verdict"] == "slower" for r in rows),
    }


def _turned_rising(row: Mapping[str, Any]) -> bool:
    return bool(row["kind"] == "slope" and row["base_state"] == "flat" and row["new_state"] == "rising")


def _turned_failing(row: Mapping[str, Any]) -> bool:
    return bool(row["kind"] == "survival" and row["verdict"] == "slower")


def _identity(artifact: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "commit": artifact["context"]["source"]["commit"],
        "status": artifact["status"],
        "started_at": artifact["timing"]["started_at"],
        "host": host_identity(artifact),
    }


def _json_output(value: str | None) -> Path | None:
    try:
        return json_output_path("--json-file", value)
    except OutputPathError as exc:
        raise SoakCompareError(exc.flag, exc.reason) from None


def report_text(report: Mapping[str, Any]) -> str:
    """The report as one strict JSON document, newline-terminated."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def run_compare(
    base_path: Path,
    new_path: Path,
    *,
    threshold: float,
    allow_cross_host: bool,
    json_file: str | None,
    must_survive_s: float | None = None,
) -> dict[str, Any]:
    """Load, check and compare; write the JSON report when asked. Raises SoakCompareError/ArtifactError
    before anything is written, ValueError when the report violates its own schema."""
    if not 0 < threshold < 1:
        raise SoakCompareError("--threshold", f"must be a fraction in (0, 1), got {threshold}")
    out = _json_output(json_file)
    (base, base_samples), (new, new_samples) = load_run(base_path), load_run(new_path)
    report = compare_soaks(
        (base, new),
        (base_samples, new_samples),
        threshold=threshold,
        allow_cross_host=allow_cross_host,
        must_survive_s=must_survive_s,
    )
    report["base"]["path"], report["new"]["path"] = str(base_path), str(new_path)
    errors = sorted_errors(report, REPORT_SCHEMA)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "<root>"
        raise ValueError(f"compare report violates {REPORT_SCHEMA} at {where}: {errors[0].message}")
    if out is not None:
        write_atomic(out, report_text(report))
    return report


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4g}"


def _verdict_cell(row: Mapping[str, Any]) -> str:
    word = (
        row["verdict"] if row["kind"] == "throughput" else RESOURCE_WORDS.get(row["verdict"], row["verdict"])
    )
    return f"[{VERDICT_STYLE[row['verdict']]}]{word}"


def _change_cell(row: Mapping[str, Any]) -> str:
    if row["kind"] in ("slope", "survival"):
        return f"{row['base_state'] or '-'} -> {row['new_state'] or '-'}"
    if row["ci_low"] is not None:
        return f"{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return "-" if row["ratio"] is None else f"{row['ratio']:.3f}"


def print_comparison(report: Mapping[str, Any], console: Console) -> None:
    """The verdict table, differences and host notes first, one note per row that has one after it."""
    if report["cross_host"]:
        console.print(
            "[bold yellow]comparison ACROSS HOSTS (--allow-cross-host): "
            + "; ".join(report["host_differences"])
        )
    for diff in report["setting_differences"]:
        console.print(f"setting differs: {diff['field']}: {diff['base']!r} -> {diff['new']!r}")
    table = Table(title=f"soak compare: verdict at a {report['threshold']:.0%} minimum effect")
    for column in ("measure", "unit", "base", "new", "new/base [95% CI] or slope state", "verdict"):
        table.add_column(column)
    for row in report["measures"]:
        table.add_row(
            row["measure"],
            row["unit"],
            _cell(row["base"]),
            _cell(row["new"]),
            _change_cell(row),
            _verdict_cell(row),
        )
    console.print(table)
    for row in report["measures"]:
        if row["note"]:
            console.print(f"[yellow]note[/] {row['measure']}: {row['note']}")
    if report["turned_rising"]:
        console.print("[bold red]turned from flat to rising: " + ", ".join(report["turned_rising"]))
    if report["turned_failing"]:
        console.print(
            "[bold red]fails the survival target in the new soak only: " + ", ".join(report["turned_failing"])
        )
    if report["survival_target_seconds"] is None:
        console.print(
            "survival: not compared (neither soak declared --must-survive; pass --must-survive to judge both)"
        )
    console.print(f"method: {report['method']}")


@dataclass(frozen=True)
class CompareOptions:
    """What `soak compare` was asked for besides the two artifacts."""

    threshold: float = 0.05
    must_survive_s: float | None = None
    allow_cross_host: bool = False
    fail_on_regression: bool = False
    as_json: bool = False
    json_file: str | None = None
    ci: CiOutputs = field(default_factory=CiOutputs)


def soak_compare_suite(report: Mapping[str, Any]) -> CiSuite:
    """The CI suite of a soak comparison: every measure is gated, as ``--fail-on-regression`` gates."""
    return compare_suite(report, tool="soak.compare", case_name=lambda row: str(row["measure"]))


def compare_command(paths: tuple[Path, Path], options: CompareOptions) -> int:
    """The exit code of ``soak compare`` (messages and the table on stderr, ``--json`` on stdout)."""
    console = Console(stderr=True)
    try:
        report = run_compare(
            paths[0], paths[1], threshold=options.threshold, allow_cross_host=options.allow_cross_host,
            json_file=options.json_file, must_survive_s=options.must_survive_s,
        )  # fmt: skip
        text = report_text(report)
    except (SoakCompareError, ArtifactError) as exc:
        console.print(f"[red]soak compare: {escape(str(exc))}")
        return 2
    except (ValueError, OSError) as exc:  # a report violating its own schema is our bug; write nothing
        console.print(f"[red]soak compare: report not written: {escape(str(exc))}")
        return 1
    print_comparison(report, console)
    try:
        for path in options.ci.emit([soak_compare_suite(report)]):
            console.print(f"ci: {path}", markup=False)
    except CiOutputError as exc:
        console.print(f"[red]soak compare: {escape(str(exc))}")
        return 2
    if options.as_json:
        sys.stdout.write(text)
        sys.stdout.flush()
    if options.fail_on_regression and report["regression"]:
        console.print("[red]soak compare: regression beyond the threshold")
        return 1
    return 0
