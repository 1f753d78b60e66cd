"""``probe compare BASE NEW``: a noise-aware verdict per measure between two probe artifacts.

    probe compare BASE.json NEW.json [--threshold 0.05] [--allow-cross-host] [--fail-on-regression]
                  [--json] [--json-file /abs/report.json] [--bmf /abs/bmf.json]

The same workload or nothing: a different task, backend set or num_envs is refused (exit 2, naming the
field); other setting differences are listed; a different host (CPU model, cores, GPU UUIDs) is refused
unless ``--allow-cross-host``. Per backend and measure the verdict is faster | slower | no_change |
inconclusive from the ratio of medians NEW/BASE and its two-level bootstrap interval over the raw
samples (harness.two_runs.stats); a per-phase timing gets a Bonferroni interval over the phases and
needs enough processes and iterations to be called, and nothing is called when the host's load
differed too much between the runs. ``--json`` prints the report (one JSON document) on stdout and
nothing else there (the table goes to stderr); ``--json-file`` writes the same report to a file; ``--bmf`` writes the NEW probe's headline
measures and their ratios NEW/BASE as Bencher Metric Format JSON (harness.probe.bmf).
Exit codes: 0 compared; 1 ``--fail-on-regression`` and a headline measure (env control steps/s or
efficiency, :data:`GATE_MEASURES`) is ``slower``, or the report could not be written (nothing written); 2 bad input (unreadable, schema-invalid or tampered artifact, different workload or host,
bad flag), nothing written. See docs/probe.md.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import sorted_errors
from soakbench.harness.ci.cases import CiSuite
from soakbench.harness.ci.options import JunitXml, SummaryMd
from soakbench.harness.ci.outputs import CiOutputError, CiOutputs
from soakbench.harness.ci.two_runs import compare_suite
from soakbench.harness.probe.artifact import ArtifactError, load_artifact
from soakbench.harness.probe.bmf import BmfPathError, bmf_output, bmf_text, compare_bmf
from soakbench.harness.probe.samples import PHASE_SAMPLE_KEYS, measure_groups
from soakbench.harness.probe.tables import print_comparison
from soakbench.harness.two_runs.fields import host_differences, host_identity, setting_differences
from soakbench.harness.two_runs.output_path import OutputPathError, json_output_path
from soakbench.harness.two_runs.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    noise_floor,
    ratio_interval,
    samples_factor,
    verdict,
)

REPORT_SCHEMA_VERSION = 1
REPORT_SCHEMA = f"probe-compare-{REPORT_SCHEMA_VERSION}.schema.json"
DEFAULT_THRESHOLD = 0.05
METHOD = "two-level bootstrap (processes, then samples) of the ratio of medians"
# Settings that define the workload: a comparison across them compares different things.
WORKLOAD_FIELDS: tuple[str, ...] = ("task", "backends", "num_envs")
# Settings and facts that may differ; each difference is listed beside the verdicts.
LISTED_FIELDS: tuple[str, ...] = (
    "settings.warmup",
    "settings.iters",
    "settings.rounds",
    "settings.processes",
    "settings.seed",
    "settings.mjwarp_device",
    "settings.physics_threads",
    "settings.torch_threads",
    "settings.test_step_sleep_ms",
    "settings.acceptance",
    "context.source.commit",
    "context.source.dirty",
)
# (measure, higher is better): the rates per backend, then the phased loop's iteration_ms per phase.
MEASURES: tuple[tuple[str, bool], ...] = (
    ("env_control_steps_per_s", True),
    ("efficiency", True),
    *((key, False) for key in PHASE_SAMPLE_KEYS),
)
# What ``--fail-on-regression`` (and the report's ``regression``) gates on: the headline measures only.
# The phase timings stay in the report as a diagnosis of where a change landed, but they do not gate:
# a phase that matters moves the env throughput, and six per-iteration looks per backend raised A/A
# false alarms on a shared host (docs/probe.md).
GATE_MEASURES: tuple[str, ...] = ("env_control_steps_per_s", "efficiency")
# The per-phase timings are a family of len(PHASE_SAMPLE_KEYS) looks per backend; a Bonferroni interval
# keeps the chance of any false call among them near that of one headline measure (1 - confidence).
PHASE_CONFIDENCE = 1.0 - (1.0 - DEFAULT_CONFIDENCE) / len(PHASE_SAMPLE_KEYS)
# Fewer processes a side than this estimate the between-process spread (the noise floor) from too few
# medians to call any measure: 2 processes gave false calls in A/A pairs (a phase timing, and an
# efficiency ratio of 1.36), and the false-alarm rates in docs/probe.md were measured at 3.
MIN_PROCESSES = 3
# A phase timing, sampled per iteration, also needs this many iterations per process.
MIN_PHASE_ITERS = 20
# Other processes' CPU share differing by more than this between the runs: no measure is called. In 21
# A/A pairs on a shared 2-core host every false call came from a pair whose shares differed by 0.42 or
# more, none from the 13 pairs within 0.30 (docs/probe.md).
CONTENTION_BOUND = 0.25
console = Console(stderr=True)


class CompareInputError(Exception):
    """The two artifacts cannot be compared: exit 2; ``field`` names why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def workload_refusal(base: Mapping[str, Any], new: Mapping[str, Any]) -> CompareInputError | None:
    """The first workload field on which the artifacts differ, as the error to raise (None: same)."""
    for name in WORKLOAD_FIELDS:
        old, now = base["settings"][name], new["settings"][name]
        if name == "backends":
            old, now = sorted(old), sorted(now)
        if old != now:
            return CompareInputError(
                f"settings.{name}", f"base {old!r} vs new {now!r}: a different workload is not compared"
            )
    return None


def measure_row(
    backend: str, measure: str, groups: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]],
    threshold: float, higher_is_better: bool, load: str | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """One verdict row; None when a side's median is 0 (a phase that never ran has no ratio). ``load``:
    why the host's load forbids a call (see :func:`load_note`)."""
    base, new = groups
    phase = measure in PHASE_SAMPLE_KEYS
    confidence = PHASE_CONFIDENCE if phase else DEFAULT_CONFIDENCE
    try:
        interval = ratio_interval(base, new, seed=0, confidence=confidence)
    except ValueError:
        return None
    floor = noise_floor(base, new)
    call = verdict(interval, threshold, higher_is_better=higher_is_better, noise_floor=floor)
    too_few = too_few_samples(groups, phase=phase)
    notes = [n for n in (too_few, load if call in ("slower", "faster") else None) if n]
    if notes:
        call = "inconclusive"
    factor = samples_factor(interval, threshold)
    if call == "inconclusive" and not too_few:
        notes.append(_samples_note(measure, new, factor, threshold))
    if floor > threshold:
        notes.append(
            f"processes of one run differ so much that a change under {floor:.0%} is not called on "
            "this host (more processes or a quieter host)"
        )
    return {
        "backend": backend,
        "measure": measure,
        "higher_is_better": higher_is_better,
        "base_median": _median(base),
        "new_median": _median(new),
        "ratio": interval.ratio,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "confidence": confidence,
        "verdict": call,
        "noise_floor": floor,
        "samples_factor": None if math.isinf(factor) else factor,
        "note": "; ".join(notes) or None,
    }


def too_few_samples(
    groups: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]], *, phase: bool
) -> str | None:
    """Why a measure is not called at these sample counts (None: enough samples to call it)."""
    processes = min(len(side) for side in groups)
    iters = min(len(g) for side in groups for g in side)
    if phase and (processes < MIN_PROCESSES or iters < MIN_PHASE_ITERS):
        return (
            f"a phase timing is judged from {MIN_PROCESSES} processes of {MIN_PHASE_ITERS} iterations "
            f"a side (now {processes} of {iters}): its noise floor is not estimated at fewer"
        )
    if processes < MIN_PROCESSES:
        return (
            f"a measure is judged from {MIN_PROCESSES} processes a side (now {processes}): the noise "
            "floor, the spread between a run's processes, is not estimated from fewer"
        )
    return None


def _samples_note(measure: str, new: Sequence[Sequence[float]], factor: float, threshold: float) -> str:
    per_group = max(len(g) for g in new)
    unit = "rounds" if measure in ("env_control_steps_per_s", "efficiency") else "iters"
    needed = "more than can be estimated" if math.isinf(factor) else f"about {math.ceil(factor * per_group)}"
    return f"to resolve a {threshold:.0%} change: {needed} {unit} per process (now {per_group})"


def _median(groups: Sequence[Sequence[float]]) -> float:
    return float(statistics.median(v for g in groups for v in g))


def compare_artifacts(
    base: Mapping[str, Any], new: Mapping[str, Any], *, threshold: float, allow_cross_host: bool
) -> dict[str, Any]:
    """The comparison report (schema ``probe-compare-1``); raises CompareInputError."""
    refusal = workload_refusal(base, new)
    if refusal:
        raise refusal
    hosts = host_differences(base, new)
    if hosts and not allow_cross_host:
        raise CompareInputError(
            "context.host",
            "different hosts (" + "; ".join(hosts) + "); pass --allow-cross-host to compare anyway",
        )
    rows, skipped = [], []
    load = load_note(base["contention"]["other_cpu_share"], new["contention"]["other_cpu_share"])
    for backend in base["settings"]["backends"]:
        old, now = base["backends"][backend]["processes"], new["backends"][backend]["processes"]
        for measure, higher in MEASURES:
            groups = (measure_groups(old, measure), measure_groups(now, measure))
            row = measure_row(backend, measure, groups, threshold, higher, load)
            if row is None:
                skipped.append({"backend": backend, "measure": measure, "reason": "a median is 0 (no ratio)"})
            else:
                rows.append(row)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "soakbench.probe-compare",
        "base": _identity(base),
        "new": _identity(new),
        "threshold": threshold,
        "method": METHOD,
        "confidence": DEFAULT_CONFIDENCE,
        "resamples": DEFAULT_RESAMPLES,
        "cross_host": bool(hosts),
        "host_differences": hosts,
        "setting_differences": setting_differences(base, new, LISTED_FIELDS),
        "measures": rows,
        "skipped": skipped,
        "regression": bool(gating_regressions(rows)),
    }


def probe_compare_suite(report: Mapping[str, Any]) -> CiSuite:
    """The CI suite of a probe comparison: a case per backend and measure; only a headline measure's
    ``slower`` fails it, as only that fails ``--fail-on-regression``."""
    return compare_suite(
        report,
        tool="probe.compare",
        case_name=lambda row: f"{row['backend']}.{row['measure']}",
        gated=lambda row: row["measure"] in GATE_MEASURES,
    )


def gating_regressions(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows that fail ``--fail-on-regression``: a headline measure (:data:`GATE_MEASURES`) called
    ``slower``. A phase timing's verdict never gates, whatever it says."""
    return [r for r in rows if r["measure"] in GATE_MEASURES and r["verdict"] == "slower"]


def load_note(old: float | None, now: float | None) -> str | None:
    """Why no measure is called when the host's load differed too much between the runs (None: it did not)."""
    if old is None or now is None or abs(now - old) <= CONTENTION_BOUND:
        return None
    return (
        f"other processes used {old:.0%} (base) vs {now:.0%} (new) of the CPUs, more than "
        f"{CONTENTION_BOUND:.0%} apart: the load, not the code, can explain a difference; not called"
    )


def _identity(artifact: Mapping[str, Any]) -> dict[str, Any]:
    contention = artifact["contention"]
    return {
        "commit": artifact["context"]["source"]["commit"],
        "other_cpu_share": contention["other_cpu_share"],
        "loadavg_start": contention["loadavg_start"],
        "created_unix_s": artifact["created_unix_s"],
        "host": host_identity(artifact),
        "unstable": sorted(n for n, e in artifact["backends"].items() if e["stability"]["unstable"]),
    }


def validate_report(report: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first violation of the report schema."""
    errors = sorted_errors(report, REPORT_SCHEMA)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "<root>"
        raise ValueError(f"compare report violates {REPORT_SCHEMA} at {where}: {errors[0].message}")


def json_output(flag: str, value: str | None) -> Path | None:
    """``value`` as the absolute ``.json`` path in an existing directory that ``flag`` must name (None:
    not asked); CompareInputError naming ``flag`` otherwise."""
    try:
        return json_output_path(flag, value)
    except OutputPathError as exc:
        raise CompareInputError(flag, exc.reason) from None


def run_compare(
    base_path: Path,
    new_path: Path,
    *,
    threshold: float,
    allow_cross_host: bool,
    json_file: str | None,
    bmf: str | None = None,
) -> dict[str, Any]:
    """Load, check and compare; write the JSON report to ``json_file`` and the BMF document to ``bmf``
    when asked. Raises CompareInputError/ArtifactError/BmfPathError before anything is written, and
    ValueError (nothing written) when a document violates its schema."""
    if not 0 < threshold < 1:
        raise CompareInputError("--threshold", f"must be a fraction in (0, 1), got {threshold}")
    out, bmf_out = json_output("--json-file", json_file), bmf_output(bmf)
    base_artifact, new_artifact = load_artifact(base_path), load_artifact(new_path)
    report = compare_artifacts(
        base_artifact, new_artifact, threshold=threshold, allow_cross_host=allow_cross_host
    )
    report["base"]["path"], report["new"]["path"] = str(base_path), str(new_path)
    validate_report(report)
    bmf_document = None if bmf_out is None else bmf_text(compare_bmf(report, new_artifact))
    if out is not None:
        write_atomic(out, report_text(report))
    if bmf_out is not None and bmf_document is not None:
        write_atomic(bmf_out, bmf_document)
    return report


def report_text(report: Mapping[str, Any]) -> str:
    """The report as one JSON document (strict JSON: no NaN or infinity), newline-terminated."""
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def compare(  # noqa: PLR0913 — a typer command declares one parameter per CLI option
    base: Annotated[Path, typer.Argument(help="the baseline probe artifact")],
    new: Annotated[Path, typer.Argument(help="the probe artifact to judge against it")],
    threshold: float = typer.Option(
        DEFAULT_THRESHOLD, "--threshold", help="minimum effect size (0.05 = 5 %)"
    ),
    allow_cross_host: bool = typer.Option(False, "--allow-cross-host", help="compare across hosts"),
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="exit 1 if env steps/s or efficiency is slower"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the JSON report on stdout (table: stderr)"),
    json_file: str | None = typer.Option(None, "--json-file", help="absolute path of a JSON report to write"),
    bmf: str | None = typer.Option(None, "--bmf", help="absolute path of a Bencher Metric Format file"),
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
) -> None:
    """Verdict per measure: faster | slower | no_change | inconclusive."""
    try:
        ci = CiOutputs.resolve(junit_xml, summary_md)
        report = run_compare(
            base, new, threshold=threshold, allow_cross_host=allow_cross_host, json_file=json_file, bmf=bmf
        )
        text = report_text(report)
    except (CompareInputError, ArtifactError, BmfPathError, CiOutputError) as exc:
        console.print(f"[red]probe compare: {exc}")
        raise typer.Exit(2) from None
    except (ValueError, OSError) as exc:  # a report violating its own schema is our bug; write nothing
        console.print(f"[red]probe compare: report not written: {exc}")
        raise typer.Exit(1) from None
    print_comparison(report, console)
    try:
        for path in ci.emit([probe_compare_suite(report)]):
            console.print(f"ci: {path}", markup=False)
    except CiOutputError as exc:
        console.print(f"[red]probe compare: {exc}", markup=False)
        raise typer.Exit(2) from None
    if as_json:
        sys.stdout.write(text)
        sys.stdout.flush()
    failing = gating_regressions(report["measures"])
    for row in failing:
        console.print(
            f"[red]probe compare: {row['backend']} {row['measure']} slower, x{row['ratio']:.3f} "
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
        )
    if fail_on_regression and failing:
        console.print("[red]probe compare: regression of a headline measure beyond the threshold")
        raise typer.Exit(1)
    raise typer.Exit(0)
