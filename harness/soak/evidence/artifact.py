"""Soak artifact 0.4.0: assemble, validate, write atomically, load (foundation/schemas/soak-artifact-0.4.0.schema.json).

The schema file is the only definition of the format; this module assembles a dict from the monitor's
observation + evaluation and refuses to write anything that does not validate. Field reference:
docs/soak-artifact.md. A 0.3.0 artifact (no ``limits``, no ``survival``) stays readable: it is validated
against its own schema, and judged again on the rows it has evidence for.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soakbench.foundation import schema
from soakbench.foundation.atomic import write_atomic
from soakbench.harness.soak.verdicts.judgement import Judgement
from soakbench.harness.soak.verdicts.summary_rows import lookup_or_none
from soakbench.harness.soak.verdicts.summary_sections import int_or_none, summary_sections

ARTIFACT_SCHEMA_VERSION = "0.4.0"
SCHEMA_NAME = f"soak-artifact-{ARTIFACT_SCHEMA_VERSION}.schema.json"
#: every version this soakbench reads, oldest first (each validated against its own schema)
READABLE_VERSIONS: tuple[str, ...] = ("0.3.0", ARTIFACT_SCHEMA_VERSION)

#: sample ``totals`` fields whose maxima are reported as peaks (same names in ``resource_summary.peaks``)
_PEAK_TOTALS = (
    "process_count",
    "rss_bytes",
    "pss_bytes",
    "uss_bytes",
    "swap_bytes",
    "gpu_memory_bytes",
    "eventfd",
    "shared_memory_fd",
    "fd_total",
    "threads",
)


class ArtifactError(ValueError):
    """The artifact is invalid or unreadable; the message names the file and the JSON path (exit code 2)."""


def schema_name(version: str = ARTIFACT_SCHEMA_VERSION) -> str:
    """The schema file of artifact ``version`` (one of ``READABLE_VERSIONS``)."""
    return f"soak-artifact-{version}.schema.json"


def load_schema(version: str = ARTIFACT_SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON schema (Draft 2020-12) of artifact ``version``, as shipped in ``foundation/schemas/``."""
    return schema.load_schema(schema_name(version))


def validation_errors(artifact: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Every violation of ``version``'s schema as ``"$.json.path: message"``, sorted by path (empty when
    valid). Without ``version``: the artifact's own, when it is one this soakbench reads (else the
    current one, which then names the version field)."""
    own = artifact.get("artifact_schema_version")
    chosen = version or (own if own in READABLE_VERSIONS else ARTIFACT_SCHEMA_VERSION)
    return schema.validation_errors(artifact, schema_name(str(chosen)), limit=10**6)


def _progress_max(samples: Sequence[Mapping[str, Any]], section: str, key: str) -> int | None:
    values = [
        int_or_none(lookup_or_none(s.get("progress"), f"{section}.{key}"))
        for s in samples
        if s.get("progress")
    ]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def resource_peaks(
    samples: Sequence[Mapping[str, Any]], run_summary: Mapping[str, Any] | None
) -> dict[str, int | None]:
    """Peaks over the samples' totals (null when a series is all null) plus replay/inference peaks.

    Replay high-water, inference events and max in-flight come from the run_summary's manifest when it
    has them, else from the maximum over the samples' progress records, else null.
    """
    peaks: dict[str, int | None] = {}
    for key in _PEAK_TOTALS:
        values = [int_or_none((s.get("totals") or {}).get(key)) for s in samples]
        present = [v for v in values if v is not None]
        peaks[key] = max(present) if present else None
    for out, manifest_path, section, key in (
        (
            "replay_high_water_occupancy",
            "runtime_manifest.replay_ingress.high_water_occupancy",
            "replay",
            "high_water_occupancy",
        ),
        ("inference_events", "runtime_manifest.inference_flight.events", "inference", "events"),
        (
            "inference_max_in_flight",
            "runtime_manifest.inference_flight.max_in_flight",
            "inference",
            "max_in_flight",
        ),
    ):
        from_summary = int_or_none(lookup_or_none(run_summary, manifest_path))
        peaks[out] = from_summary if from_summary is not None else _progress_max(samples, section, key)
    return peaks


@dataclass(frozen=True)
class MonitorRecord:
    """What the monitor recorded of one watched command, beside the observation it judged.

    Attributes:
        samples: the samples as streamed to ``samples_path`` (for the peaks).
        timing: sample_interval_s, startup_timeout_s, stale_progress_s, post_shutdown_grace_s,
            min_duration_s, duration_s, started_at, finished_at (unix s) [, termination_grace_s].
        command: the monitored argv; log_dir: the run directory (absolute).
        startup_end_t: seconds since monitor start at which start-up ended, or None.
        run_settings: ``soak run`` only: algo, task, sim, num_envs, iterations, extra overrides.
        ranks: the ``ranks`` section of a job of several ranks (``harness.soak.verdicts.ranks``).
        monitor_overhead: ``driver.overhead(result)``.
        monitor: what the monitor did: root_pid, console_log_path, shm_attribution, monitor_error,
            progress_parse_errors, known_processes, killed_by_monitor (schema ``monitor``).
        samples_sha256: sha256 hex digest of the samples file as written.
        oom: the ``oom`` section (harness.soak.verdicts.oom): OOM-killed tree processes and host memory pressure.
        forensics: ``harness.soak.host.forensics.Forensics.section()`` (stacks taken before a kill).
    """

    samples: Sequence[Mapping[str, Any]]
    samples_path: str | os.PathLike[str]
    timing: Mapping[str, float]
    command: Sequence[str]
    log_dir: str | os.PathLike[str]
    startup_end_t: float | None
    run_settings: Mapping[str, Any] | None = None
    ranks: Mapping[str, Any] | None = None  # harness.soak.verdicts.ranks: a job of several ranks only
    monitor_overhead: Mapping[str, Any] | None = None
    monitor: Mapping[str, Any] | None = None
    samples_sha256: str | None = None
    oom: Mapping[str, Any] | None = None  # harness.soak.verdicts.oom.assess(...) section
    forensics: Mapping[str, Any] | None = None
    sampler: Mapping[str, Any] | None = None  # harness.soak.host.interface.Capabilities.describe
    inputs: Mapping[str, Any] | None = None  # foundation.inputs.merge_manifest: what produced the evidence
    limits: Mapping[str, Any] | None = None  # harness.soak.host.limits.HostLimits.to_json()


def build_artifact(
    *,
    judgement: Judgement,
    record: MonitorRecord,
    context: Mapping[str, Any],
) -> dict[str, Any]:
    """Assemble the 0.4.0 artifact (plain JSON data; not yet validated — ``write_artifact`` validates).

    Args:
        judgement: ``harness.soak.verdicts.judgement.judge``'s result.
        record: what the monitor recorded of the run.
        context: ``harness.context.collect_context()``.
    """
    obs, evaluation, gates = judgement.observation, judgement.evaluation, judgement.gates
    leak = obs.leak_verdicts.to_json()
    summary = obs.run_summary if gates.judges_summary(obs.mode) else None
    artifact: dict[str, Any] = {
        "artifact_schema_version": ARTIFACT_SCHEMA_VERSION,
        "mode": obs.mode,
        "status": evaluation.status,
        "trainer_returncode": obs.trainer_returncode,
        "failure_reason": evaluation.failure_reason,
        "failure_classification": evaluation.failure_classification,
        "monitor_failure": obs.monitor_failure,
        **summary_sections(summary),
        "post_shutdown_residual_processes": [dict(p) for p in obs.residual_processes],
        "orphaned_shm_segments": [dict(s) for s in obs.orphaned_shm_segments],
        "resource_summary": {
            "peaks": resource_peaks(record.samples, summary),
            "leak_verdicts": dict(leak["leak_verdicts"]),
            "trends": dict(leak["trends"]),
            "sample_count": len(record.samples),
            "startup_end_t": record.startup_end_t,
        },
        "samples_path": os.fspath(record.samples_path),
        "run_contract": gates.judges_summary(obs.mode),
        "run_summary": dict(summary) if summary is not None else None,
        "context": dict(context),
        "criteria": evaluation.criteria_dicts(),
        "timing": dict(record.timing),
        "command": list(record.command),
        "log_dir": os.fspath(record.log_dir),
    }
    if obs.observation is not None:
        artifact["resource_summary"]["observation"] = dict(obs.observation)
    if obs.per_process is not None:
        artifact["resource_summary"]["per_process"] = obs.per_process.to_json()
    if obs.throughput_drift is not None:
        artifact["throughput_drift"] = {**obs.throughput_drift, "fails_run": gates.fail_on_throughput_drift}
    if obs.tree_exits is not None:
        artifact["tree_exits"] = dict(obs.tree_exits)
    if obs.gpu_health is not None:
        artifact["gpu_health"] = {**obs.gpu_health.to_json(), "fails_on_throttle": gates.fail_on_gpu_throttle}
    if obs.survival is not None:
        artifact["survival"] = obs.survival.to_json()
    if record.samples_sha256 is not None:
        artifact["samples_sha256"] = record.samples_sha256
    optional = {
        "run_settings": record.run_settings,
        "ranks": record.ranks,
        "monitor_overhead": record.monitor_overhead,
        "monitor": record.monitor,
        "oom": record.oom,
        "forensics": record.forensics,
        "sampler": record.sampler,
        "inputs": record.inputs,
        "limits": record.limits,
    }
    artifact.update({key: dict(value) for key, value in optional.items() if value is not None})
    if record.oom is not None and record.oom.get("shutdown_cause") is not None and summary is not None:
        artifact["shutdown"]["cause"] = record.oom["shutdown_cause"]  # e.g. collector_failure by OOM kill
    return artifact


def _dumps(artifact: Mapping[str, Any]) -> str:
    try:
        return json.dumps(artifact, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"artifact is not plain JSON: {exc}") from exc


def write_artifact(path: str | os.PathLike[str], artifact: Mapping[str, Any]) -> Path:
    """Validate against the 0.4.0 schema, then write it with ``foundation.atomic.write_atomic``.

    Raises ArtifactError naming every failing JSON path; on error nothing is written.
    """
    target = Path(path)
    errors = validation_errors(artifact, ARTIFACT_SCHEMA_VERSION)
    if errors:
        listed = "\n  ".join(errors[:20]) + (
            f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        )
        raise ArtifactError(
            f"refusing to write {target}: not a valid soak artifact {ARTIFACT_SCHEMA_VERSION}:\n  {listed}"
        )
    text = _dumps(artifact)
    write_atomic(target, text)
    return target


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(g) for g in match.groups()) if match else None


def load_artifact(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a 0.3.0 or 0.4.0 artifact; ArtifactError (naming file + JSON path) otherwise.

    A newer schema version is rejected with a message to upgrade soakbench; an older one is rejected as
    unsupported (0.2.0 artifacts lack the leak verdicts and context this version requires).
    """
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ArtifactError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{source}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from exc
    except UnicodeDecodeError as exc:  # a binary file (a compressed samples file, say), not an artifact
        raise ArtifactError(f"{source}: not UTF-8 text (byte {exc.start}): not a soak artifact") from exc
    if not isinstance(data, dict):
        raise ArtifactError(f"{source}: $: expected a JSON object, got {type(data).__name__}")
    version = data.get("artifact_schema_version")
    if version not in READABLE_VERSIONS:
        parsed = _version_tuple(version) if isinstance(version, str) else None
        supported = _version_tuple(ARTIFACT_SCHEMA_VERSION)
        if parsed is not None and supported is not None and parsed > supported:
            raise ArtifactError(
                f"{source}: $.artifact_schema_version: {version} is newer than the {ARTIFACT_SCHEMA_VERSION} "
                "this soakbench reads; upgrade soakbench to read it"
            )
        raise ArtifactError(
            f"{source}: $.artifact_schema_version: {version!r} is not supported; only "
            f"{' and '.join(READABLE_VERSIONS)} artifacts can be read (re-run the soak to produce one)"
        )
    errors = validation_errors(data, str(version))
    if errors:
        raise ArtifactError(f"{source}: not a valid soak artifact {version}:\n  " + "\n  ".join(errors[:20]))
    return data
