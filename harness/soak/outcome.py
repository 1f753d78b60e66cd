"""From a finished watch to evidence: leak verdicts, pass table, artifact, HTML report, console verdict.

``run_monitor`` is the whole `soak run` / `soak monitor` job. The judgement itself is pure
(``harness.soak.verdicts.trends`` and ``harness.soak.verdicts.evaluation``); this module only gathers the inputs and writes
the outputs.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.foundation.inputs import ProcessInputs
from soakbench.harness.inputs import collection_inputs, run_manifest
from soakbench.harness.soak.evidence.live import make_view
from soakbench.harness.soak.loop.driver import MonitorResult, watch
from soakbench.harness.soak.loop.overhead import overhead
from soakbench.harness.soak.loop.run_summary import read_run_summary
from soakbench.harness.soak.loop.settings import MonitorSettings, validate_settings

if TYPE_CHECKING:
    from soakbench.harness.ci.outputs import CiOutputs
    from soakbench.harness.soak.verdicts.judgement import RecordedFacts

#: the process exit code of each soak status; 2 is bad input (nothing watched). ``inconclusive``: no row
#: failed, but the survival projection could not decide against --must-survive (docs/ci.md).
EXIT_CODES: dict[str, int] = {"passed": 0, "failed": 1, "inconclusive": 3}
SOAK_SCHEMA_REL = "foundation/schemas/soak-artifact-0.4.0.schema.json"


def monitor_block(settings: MonitorSettings, result: MonitorResult) -> dict[str, Any]:
    """The artifact's ``monitor`` object: what the monitor itself did (processes seen, what it killed, its
    own error). Settings, timing and overhead have their own top-level artifact fields."""
    return {
        "root_pid": result.root_pid,
        "console_log_path": str(settings.console_path),
        "shm_attribution": settings.shm_attribution,
        "monitor_error": result.monitor_error,
        "progress_parse_errors": result.progress_parse_errors,
        "known_processes": result.known_processes,
        "killed_by_monitor": result.killed_by_monitor,
        "stop": None if result.stop is None else result.stop.to_json(),
    }


def samples_digest(path: Path) -> str:
    """sha256 of the samples file; a run that took no sample gets an empty file, so the artifact's
    reference always resolves."""
    if not path.exists():
        path.write_bytes(b"")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _with_ranks(result: MonitorResult) -> str | None:
    """The monitor's failure detail and, for a hang of a job of several ranks, which ranks wait inside a
    collective and which do not (from the stacks taken before the kill)."""
    from soakbench.harness.soak.verdicts.ranks import straggler_sentence

    if result.monitor_failure not in ("timeout/stale_tick", "shutdown_hang") or result.forensics is None:
        return result.monitor_detail
    ranks = straggler_sentence(result.forensics.captures, result.known_processes)
    return "; ".join(part for part in (result.monitor_detail, ranks) if part) or None


def _manifest(settings: MonitorSettings, collection: ProcessInputs | None) -> dict[str, Any] | None:
    """The artifact's input manifest, or None (said on stderr) when the records cannot make one: such
    evidence is judged by the whole-tree freshness rule."""
    if collection is None:
        return None
    manifest, problem = run_manifest(Path(settings.log_dir), collection)
    if problem is not None:
        print(f"soak: no input manifest: {problem}", file=sys.stderr)
    return manifest


def evidence_root(settings: MonitorSettings) -> Path | None:
    """The work tree a monitored run's evidence speaks about: for `soak monitor --cell`, the one it runs
    in (an outside project's repository); None (the harness's default) otherwise."""
    from soakbench.harness.context import cell_source_root

    return cell_source_root() if settings.mode == "monitor" and settings.run_settings else None


def _facts(
    settings: MonitorSettings,
    result: MonitorResult,
    *,
    run_summary: Mapping[str, Any] | None,
    summary_error: str | None,
    oom_lines: Sequence[str],
) -> RecordedFacts:
    """What the monitor observed besides the samples, as the judgement takes it."""
    from soakbench.harness.soak.verdicts.judgement import RecordedFacts
    from soakbench.harness.soak.verdicts.tree_deaths import KnownExits, tree_exits_section

    known = KnownExits(
        result.exits,
        result.reaped,
        result.killed_by_monitor,
        result.fork_events.get("reason", "the process-events connector was not opened"),
        stopped_t=None if result.stop is None else result.stop.t,
    )
    return RecordedFacts(
        mode=settings.mode,
        root_pid=result.root_pid,
        trainer_returncode=result.trainer_returncode,
        monitor_failure=result.monitor_failure,
        duration_s=result.duration_s,
        startup_end_t=result.startup_end_t,
        run_summary=run_summary,
        run_summary_error=summary_error,
        residual_processes=result.residual_processes,
        orphaned_shm_segments=result.orphaned_shm_segments,
        oom_kills=tuple(oom_lines),
        monitor_detail=_with_ranks(result),
        tree_exits=tree_exits_section(result.samples, result.root_pid, known, settings.allow_signal_deaths),
        gpu_record=result.gpu_health,
        sampler=result.sampler,
        limits=result.limits,
        stop=result.stop,
        reaped=result.reaped,
        exits=result.exits,
    )


def conclude(
    settings: MonitorSettings, result: MonitorResult, collection: ProcessInputs | None = None
) -> dict[str, Any]:
    """Judge a finished watch and write artifact + report; returns the artifact written. ``collection``:
    what the monitor's collection side loaded (``harness.inputs``), merged with the records its watched
    processes left under the log directory into the artifact's input manifest."""
    from soakbench.harness.context import collect_context
    from soakbench.harness.soak.evidence.artifact import MonitorRecord, build_artifact, write_artifact
    from soakbench.harness.soak.evidence.report import render_report
    from soakbench.harness.soak.host.gpu_watch import at_start
    from soakbench.harness.soak.verdicts.first_death import process_exits
    from soakbench.harness.soak.verdicts.judgement import judge
    from soakbench.harness.soak.verdicts.oom import ExitEvidence, assess
    from soakbench.harness.soak.verdicts.ranks import JobTree, last_seen_by_rank, ranks_section

    run_summary, summary_error = (None, None)
    if settings.judges_summary:
        run_summary, summary_error = read_run_summary(settings.log_dir)
    oom_lines, oom = assess(
        result.samples,
        result.host_tail,
        result.kernel_log,
        (result.root_pid, result.trainer_returncode),
        run_summary,
        ExitEvidence(result.reaped, result.fork_events),
    )
    judgement = judge(
        result.samples,
        facts=_facts(
            settings, result, run_summary=run_summary, summary_error=summary_error, oom_lines=oom_lines
        ),
        gates=settings.gates,
    )
    record = MonitorRecord(
        samples=result.samples,
        samples_path=settings.samples_path,
        timing={
            "sample_interval_s": settings.sample_interval_s,
            "startup_timeout_s": settings.startup_timeout_s,
            "stale_progress_s": settings.stale_progress_s,
            "post_shutdown_grace_s": settings.post_shutdown_grace_s,
            "termination_grace_s": settings.termination_grace_s,
            "shutdown_timeout_s": settings.forensics.shutdown_timeout_s,
            "min_duration_s": settings.min_duration_s,
            "duration_s": result.duration_s,
            "started_at": result.started_at,
            "finished_at": time.time(),
        },
        command=list(settings.command),
        log_dir=settings.log_dir,
        startup_end_t=result.startup_end_t,
        run_settings=dict(settings.run_settings) if settings.mode == "run" or settings.run_settings else None,
        ranks=ranks_section(
            judgement.observation,
            judgement.gates,
            JobTree(
                known_processes=result.known_processes,
                rank_progress=result.rank_progress,
                last_seen=last_seen_by_rank(result.samples),
                root_pid=result.root_pid,
                ended=process_exits(result.samples, result.exits),
            ),
        ),
        monitor_overhead=overhead(result),
        monitor=monitor_block(settings, result),
        samples_sha256=samples_digest(settings.samples_path),
        oom=oom,
        forensics=result.forensics.section() if result.forensics is not None else None,
        sampler=result.sampler or None,
        inputs=_manifest(settings, collection),
        limits=result.limits,
    )
    artifact = build_artifact(
        judgement=judgement,
        record=record,
        context=collect_context(evidence_root(settings), health_at_start=at_start(result.gpu_health)),
    )
    write_artifact(settings.output, artifact)
    render_report(settings.output, artifact)  # validated by write_artifact just now
    return artifact


def announce(
    settings: MonitorSettings, artifact: Mapping[str, Any], report: Path, ci_written: list[Path]
) -> None:
    """The verdict, then where everything was written, on stdout."""
    from rich.console import Console

    from soakbench.harness.soak.evidence.verdict_table import print_verdict

    console = Console(file=sys.stdout)
    print_verdict(artifact, console)
    for label, path in (("artifact", settings.output), ("report", report)):
        print(f"{label}: {path}")
    for path in ci_written:
        print(f"ci: {path}")


def run_monitor(settings: MonitorSettings, ci: CiOutputs | None = None) -> int:
    """Validate, watch, judge, write (the CI outputs too, when asked). Returns 0 passed, 1 failed,
    3 inconclusive (``EXIT_CODES``); SettingsError (-> 2) before any spawn."""
    from soakbench.harness.ci.soak import soak_suite
    from soakbench.harness.soak.evidence.report import report_path

    validate_settings(settings)
    result = watch(settings, make_view(settings.live, settings.progress_every_s))
    # before judgement code loads; relative to the project the evidence speaks about
    collection = collection_inputs("monitor", schemas=(SOAK_SCHEMA_REL,), root=evidence_root(settings))
    artifact = conclude(settings, result, collection)
    from soakbench.harness.ci.outputs import CiOutputError

    report = report_path(settings.output)
    written, ci_error = [], None
    try:
        written = [] if ci is None else ci.emit([soak_suite(artifact, settings.output, report)])
    except CiOutputError as exc:  # the artifact and report stand; the CI file asked for does not
        ci_error = str(exc)
    announce(settings, artifact, report, written)  # `--live off` drops the live panel, never the verdict
    if ci_error is not None:
        print(f"soak: error: {ci_error}", file=sys.stderr)
        return 2
    return EXIT_CODES[artifact["status"]]
