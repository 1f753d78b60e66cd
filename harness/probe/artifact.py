"""The probe artifact: its assembly from what the workers measured, its schema, validation before an atomic
write, and the strict read a comparison or an ingest starts from (schema first, then every stated figure
against the raw samples)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import sorted_errors
from soakbench.harness.context import collect_context
from soakbench.harness.probe.samples import raw_disagreements
from soakbench.harness.probe.settings import ALGO, ProbeSettings
from soakbench.harness.probe.stats import PROFILER_ENV_EXACT, PROFILER_ENV_PREFIXES

SCHEMA_VERSION = "0.4.0"
SCHEMA_REL = f"foundation/schemas/probe-{SCHEMA_VERSION}.schema.json"  # an input of every probe artifact
SCHEMA_NAME = f"probe-{SCHEMA_VERSION}.schema.json"
EXCLUSIONS: tuple[dict[str, str], ...] = (
    {
        "name": "policy_inference",
        "reason": "actions are seeded uniform noise sampled before the clock starts",
    },
    {"name": "inference_ipc", "reason": "no collector/learner processes: no weight publication or ring IPC"},
    {"name": "replay_ingestion", "reason": "transitions are not written to the shared-memory replay ingress"},
    {"name": "learner_updates", "reason": "no gradient updates run"},
    {"name": "manager_dispatch", "reason": "the env is stepped directly, not through the training manager"},
)


@dataclass(frozen=True)
class AcceptanceOutcome:
    """The acceptance checks that ran and whether they all held."""

    checks: list[dict[str, Any]]
    accepted: bool


class ArtifactError(ValueError):
    """An artifact that cannot be trusted; ``field`` names where (``$`` for the whole file)."""

    def __init__(self, source: str, field: str, message: str) -> None:
        super().__init__(f"{source}: {field}: {message}")
        self.field = field


def validate_artifact(artifact: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first schema violation (Draft 2020-12)."""
    errors = sorted_errors(artifact, SCHEMA_NAME)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "<root>"
        raise ValueError(f"probe artifact violates {SCHEMA_NAME} at {where}: {first.message}")


def write_artifact(path: Path, artifact: Mapping[str, Any]) -> None:
    """Validate, then write it with ``foundation.atomic.write_atomic``."""
    validate_artifact(artifact)
    write_atomic(path, json.dumps(artifact, indent=2, allow_nan=False) + "\n")


def load_artifact(path: Path) -> dict[str, Any]:
    """Read a probe artifact this version can compare: JSON, schema ``probe-0.4.0``, and every stated
    summary reproduced by its raw samples. Raises :class:`ArtifactError` naming the field."""
    source = str(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise ArtifactError(source, "$", f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(source, "$", f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ArtifactError(source, "$", "a probe artifact is a JSON object")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ArtifactError(
            source, "schema_version", f"is {version!r}; only {SCHEMA_VERSION} artifacts carry raw samples"
        )
    errors = sorted_errors(doc, SCHEMA_NAME)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "$"
        raise ArtifactError(source, where, f"violates {SCHEMA_NAME}: {errors[0].message}")
    try:
        problems = raw_disagreements(doc)
    except ValueError as exc:  # e.g. a round of zero measured time: no rate can be recomputed
        raise ArtifactError(source, "backends", f"raw samples unusable: {exc}") from None
    if problems:
        field, message = problems[0]
        raise ArtifactError(source, field, f"{message} (tampered or corrupt)")
    return doc


def build_artifact(
    settings: ProbeSettings,
    argv: list[str],
    results: dict[str, dict[str, Any]],
    acceptance: AcceptanceOutcome,
    span: tuple[float, float],
    health_at_start: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the probe artifact (schema ``probe-0.4.0``, ``contention`` added by the caller);
    ``span`` is (started, finished) in Unix s; ``health_at_start`` the GPUs' state read before measuring
    (None: read now)."""
    started, finished = span
    checks, accepted = acceptance.checks, acceptance.accepted
    settings_block = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items()}
    settings_block["backends"] = list(settings.backends)
    settings_block["algo"] = ALGO
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "soakbench.probe",
        "created_unix_s": finished,
        "duration_s": finished - started,
        "command": argv,
        "probe_pid": os.getpid(),
        "settings": settings_block,
        "exclusions": [dict(e) for e in EXCLUSIONS],
        "comparison_note": (
            "compare backends by throughput_env_control_steps_per_s and phases.iteration_ms; phase "
            "boundaries are device-synchronized but families differ in what each phase contains"
        ),
        "context": collect_context(health_at_start=health_at_start),
        "backends": results,
        "acceptance": {
            "requested": settings.acceptance,
            "passed": accepted if settings.acceptance else None,
            "idle_memory_threshold_bytes": settings.idle_memory_threshold_bytes,
            "profiler_env_rejected": {
                "exact": list(PROFILER_ENV_EXACT),
                "prefixes": list(PROFILER_ENV_PREFIXES),
            },
            "checks": checks,
        },
    }
