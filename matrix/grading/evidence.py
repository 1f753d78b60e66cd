"""Filed evidence: the index, per-kind normalization into EvidenceFacts, and platform-fact checks.

Normalization is pure: it takes the parsed document and the schema text and returns facts, with every
reason the evidence can never count listed in ``problems`` (schema-invalid, failing, platform
contradictions, a test-only hook). Freshness (git) is added by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from soakbench.harness.probe.samples import first_raw_disagreement
from soakbench.harness.two_runs.fields import dig
from soakbench.matrix.freshness import parse_manifest
from soakbench.matrix.grading.hooks import hooks_in
from soakbench.matrix.grading.rederive import missing_fields
from soakbench.matrix.grading.soak_sampler import sampler_of, unchecked_of
from soakbench.matrix.model import (
    EVIDENCE_KINDS,
    LANES,
    PLATFORM_SYSTEM,
    PLATFORMS,
    Binding,
    BoundTally,
    EvidenceFacts,
    InputManifest,
    SoakSurvival,
)
from soakbench.matrix.schema_check import schema_errors

INDEX_REL = "matrix/evidence/index.json"
INDEX_SCHEMA = "evidence-index.schema.json"
INDEX_VERSION = 1
JUNIT_SCHEMA = "junit-summary-1.schema.json"
# Artifact schema versions this generator reads, and the schema file that defines each.
ARTIFACT_SCHEMAS: dict[str, dict[str, str]] = {
    "soak": {"0.3.0": "soak-artifact-0.3.0.schema.json", "0.4.0": "soak-artifact-0.4.0.schema.json"},
    "probe": {"0.3.0": "probe-0.3.0.schema.json", "0.4.0": "probe-0.4.0.schema.json"},
}
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _first(doc: Any, *paths: str) -> Any:
    for path in paths:
        value = dig(doc, path)
        if value is not None:
            return value
    return None


def version_key(version: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of a ``x.y.z`` version string, None when malformed."""
    match = _VERSION_RE.match(version)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def artifact_version_problem(kind: str, version: Any) -> str | None:
    """None when ``version`` is a schema version this generator reads for ``kind``; otherwise why not.

    A version newer than every known one is reported as a *future* schema version.
    """
    known = ARTIFACT_SCHEMAS[kind]
    if isinstance(version, str) and version in known:
        return None
    parsed = version_key(version) if isinstance(version, str) else None
    newest = max(version_key(v) or (0, 0, 0) for v in known)
    if parsed is not None and parsed > newest:
        return f"future schema version {version}; this generator reads {', '.join(sorted(known))}"
    return f"unsupported schema version {version!r}; this generator reads {', '.join(sorted(known))}"


def detect_kind(doc: Any) -> str | None:
    """``soak`` or ``probe`` from a JSON artifact's own declaration, None when it does not say."""
    declared = _first(doc, "kind", "artifact_type", "artifact")
    if isinstance(declared, str):
        for kind in ("probe", "soak"):  # "soakbench.probe" names the project, not a soak
            if kind in declared.lower():
                return kind
    if isinstance(doc, Mapping) and doc.get("mode") in ("run", "monitor"):
        return "soak"
    return None


def platform_problems(
    platform: str,
    lane: str | None,
    system: str | None,
    gpu_available: bool | None,
    backend_devices: list[tuple[str, str | None]],
    systems: Mapping[str, str] = PLATFORM_SYSTEM,
) -> list[str]:
    """Contradictions between the declared platform/lane and the facts the evidence records (pure).

    ``backend_devices`` pairs each backend the evidence exercised with its physics device (``cuda``,
    ``cpu``, or None when not recorded); ``systems``: per platform of the inventory, its host system.
    """
    out: list[str] = []
    want = systems.get(platform)
    if want is None:
        return [f"platform {platform!r} is not one of the inventory's: {', '.join(systems)}"]
    if system is None:
        out.append(f"the host system is not recorded; cannot show it is {want} ({platform})")
    elif not (system.startswith(want) or (want == "Darwin" and system.lower().startswith("macos"))):
        out.append(f"recorded host system {system!r} is not {want}, so it cannot be {platform} evidence")
    if platform == "linux-cuda" and gpu_available is not True:
        out.append("no GPU was available, so it cannot be linux-cuda evidence")
    if lane == "cuda" and gpu_available is not True:
        out.append("lane 'cuda' but no GPU was available")
    for backend, device in backend_devices:
        if backend != "mjwarp":
            continue
        if platform == "linux-cuda" and device != "cuda":
            out.append(
                f"mjwarp ran on device {device!r}: a CPU-diagnostic mjwarp run never counts as CUDA evidence"
            )
        if platform != "linux-cuda" and device == "cuda":
            out.append(f"mjwarp ran on CUDA, which is not {platform} evidence")
    return out


def _as_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def normalize_junit(
    entry: Mapping[str, Any], doc: Any, systems: Mapping[str, str] = PLATFORM_SYSTEM
) -> EvidenceFacts:
    """Facts of a filed JUnit summary (see matrix.intake.junit); ``systems`` as for :func:`platform_problems`."""
    problems = list(schema_errors(doc, JUNIT_SCHEMA))
    tests: dict[Binding, BoundTally] = {}
    test_ids: dict[Binding, tuple[str, ...]] = {}
    cell_inputs: dict[Binding, InputManifest] = {}
    for cell in dig(doc, "cells") or []:
        if isinstance(cell, Mapping):
            ranks = _as_int(cell.get("ranks", 1)) or 1  # absent: one rank (a bad value is a schema problem)
            key = (str(cell.get("algo")), str(cell.get("task")), str(cell.get("backend")), ranks)
            manifest, _ = parse_manifest(cell.get("inputs"))
            if manifest is not None:
                cell_inputs[key] = manifest
            ids = cell.get("tests")
            test_ids[key] = tuple(str(i) for i in ids) if isinstance(ids, list) else ()
            tests[key] = BoundTally(
                *(
                    int(cell.get(k, 0)) if isinstance(cell.get(k, 0), int) else 0
                    for k in ("passed", "failed", "errors", "skipped")
                )
            )
    totals = dig(doc, "totals") or {}
    failed, errors = totals.get("failed"), totals.get("errors")
    passed = failed == 0 and errors == 0
    if not problems:
        problems += junit_count_problems(doc)
        problems += _declared_mismatch(entry, doc.get("platform"), doc.get("lane"))
        problems += platform_problems(
            entry["platform"],
            entry.get("lane"),
            doc.get("system"),
            _as_bool(doc.get("gpu_available")),
            [],
            systems,
        )
    return EvidenceFacts(
        id=entry["id"],
        kind="junit",
        file=entry["file"],
        platform=entry["platform"],
        lane=entry.get("lane"),
        commit=dig(doc, "source.commit"),
        dirty=_as_bool(dig(doc, "source.dirty")),
        passed=passed,
        status_detail=f"{totals.get('tests')} tests: {totals.get('passed')} passed, {failed} failed, "
        f"{errors} errors, {totals.get('skipped')} skipped",
        problems=tuple(problems),
        ranks=None,  # each bound test carries its own rank count in ``tests``
        tests=tests,
        test_ids=test_ids,
        time=doc.get("timestamp") if isinstance(doc, Mapping) else None,
        cell_inputs=cell_inputs,
    )


_OUTCOMES = ("passed", "failed", "errors", "skipped")


def junit_count_problems(doc: Mapping[str, Any]) -> list[str]:
    """A schema-valid JUnit summary's counts recomputed: the totals add up to ``totals.tests`` and each
    cell's outcome counts add up to the tests it lists (a hand-edited count shows here)."""
    out = []
    totals = doc["totals"]
    counted = sum(totals[k] for k in _OUTCOMES)
    if counted != totals["tests"]:
        out.append(f"totals.tests is {totals['tests']} but its outcomes add up to {counted}")
    for position, cell in enumerate(doc["cells"]):
        counted = sum(cell[k] for k in _OUTCOMES)
        if counted != len(cell["tests"]):
            out.append(
                f"cells[{position}]: outcome counts add up to {counted} but it lists {len(cell['tests'])} tests"
            )
    return out


def _declared_mismatch(entry: Mapping[str, Any], platform: Any, lane: Any) -> list[str]:
    out = []
    if platform is not None and platform != entry["platform"]:
        out.append(f"index says platform {entry['platform']!r} but the file records {platform!r}")
    if lane is not None and lane != entry.get("lane"):
        out.append(f"index says lane {entry.get('lane')!r} but the file records {lane!r}")
    return out


# The field holding each artifact kind's schema version.
VERSION_FIELD: dict[str, str] = {"soak": "artifact_schema_version", "probe": "schema_version"}
# Where each fact lives in a soak / probe artifact (first present path wins).
SOAK_FIELDS: dict[str, tuple[str, ...]] = {
    "commit": ("context.source.commit",),
    "dirty": ("context.source.dirty",),
    "algo": ("run_settings.algo", "run_settings.cell.algo"),
    "task": ("run_settings.task", "run_settings.cell.task"),
    "backend": ("run_settings.sim", "run_settings.cell.backend"),
    "overrides": ("run_settings.extra_overrides",),
    "num_envs": ("run_settings.num_envs",),
    "iterations": ("run_settings.iterations",),
    "duration_s": ("timing.duration_s",),
    "system": ("context.host.platform",),
    "gpu_available": ("context.gpu.available",),
    "time": ("timing.started_at",),
}
PROBE_FIELDS: dict[str, tuple[str, ...]] = {
    "commit": ("context.source.commit",),
    "dirty": ("context.source.dirty",),
    "task": ("settings.task",),
    "backends": ("settings.backends",),
    "mjwarp_device": ("settings.mjwarp_device",),
    "system": ("context.host.platform",),
    "gpu_available": ("context.gpu.available",),
    "time": ("created_unix_s",),
}


def unix_to_iso(value: Any) -> str | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` for a Unix time carried by the evidence (None when absent)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(float(value), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def soak_mjwarp_device(overrides: Any) -> str:
    """The MJWarp device a ``soak run`` used: its ``training.mjwarp_device=`` override, else the
    runtime default ``cuda`` (``training.mjwarp_device`` in runtime/config/sections.py)."""
    device = "cuda"
    for item in overrides if isinstance(overrides, list) else []:
        if isinstance(item, str) and item.replace(" ", "").startswith("training.mjwarp_device="):
            device = item.split("=", 1)[1].strip()
    return device


def _soak_outcome(doc: Mapping[str, Any], facts: dict[str, Any]) -> tuple[bool, str, list[str], list[Any]]:
    status = doc.get("status")
    detail = f"soak status {status}" + (
        f" ({doc.get('failure_reason')})" if doc.get("failure_reason") else ""
    )
    problems = []
    if not names_cell(doc) or not isinstance(facts["task"], str):
        problems.append(
            "a `soak monitor` artifact without --cell does not record its cell; rerun it as "
            "`soak monitor --cell TRAINER/TASK/BACKEND -- ...`, or use `soak run`"
        )
    missing = missing_fields(doc)
    if missing:  # filed before ingest re-derived soak verdicts: nothing vouches for its status
        problems.append(
            f"predates re-derivable soak evidence (no {', '.join(missing)}), so its verdict cannot be "
            "re-derived and it does not count; re-run the soak and ingest the new artifact"
        )
    if names_cell(doc):
        problems += soak_rank_problems(doc)
    backend = facts["backend"]
    devices = [(backend, soak_mjwarp_device(facts["overrides"]))] if isinstance(backend, str) else []
    return status == "passed", detail, problems, devices


def names_cell(doc: Mapping[str, Any]) -> bool:
    """True for a soak that records its cell: a `soak run`, or a `soak monitor --cell` (whose
    ``run_settings.cell`` names it); either counts by the same rules."""
    return doc.get("mode") == "run" or (
        doc.get("mode") == "monitor" and isinstance(dig(doc, "run_settings.cell"), Mapping)
    )


def _ranks_field(doc: Mapping[str, Any]) -> str:
    """Where a soak records its rank count: ``soak run``'s ``nproc_per_node``, a monitored cell's ``ranks``."""
    return "run_settings.nproc_per_node" if doc.get("mode") == "run" else "run_settings.cell.ranks"


def soak_ranks(doc: Mapping[str, Any]) -> int:
    """The rank count a soak ran its trainer with: ``run_settings.nproc_per_node`` of a `soak run`, or
    ``run_settings.cell.ranks`` of a `soak monitor --cell` (each written only for a job of several
    ranks), 1 when absent or not a count (see :func:`soak_rank_problems`)."""
    declared = _as_int(dig(doc, _ranks_field(doc)))
    return declared if declared is not None and declared >= 1 else 1


def soak_rank_problems(doc: Mapping[str, Any]) -> list[str]:
    """Why a soak's rank count cannot be believed: a ``run_settings.nproc_per_node`` (or a monitored
    cell's ``ranks``) that is not a count, that claims several ranks with no ``ranks`` section, or that
    ``ranks.world_size`` contradicts. Such an artifact would grade a topology it may not have run, so it
    never counts."""
    field = _ranks_field(doc)
    declared = dig(doc, field)
    if declared is not None and (_as_int(declared) is None or declared < 1):
        return [f"{field} is {declared!r}, not a rank count (an integer >= 1)"]
    ranks = soak_ranks(doc)
    section = doc.get("ranks")
    if not isinstance(section, Mapping):
        if ranks > 1:
            return [
                f"{field} says {ranks} ranks but the artifact has no ranks section, "
                "so nothing shows the job ran with that many ranks"
            ]
        return []
    world = section.get("world_size")
    if world == ranks:
        return []
    said = f"says {ranks} rank{'s' if ranks > 1 else ''}" if declared is not None else "is absent (one rank)"
    return [
        f"{field} {said} but ranks.world_size is {world!r}: the artifact contradicts "
        "itself about its rank count"
    ]


def _probe_outcome(
    doc: Mapping[str, Any], facts: dict[str, Any], platform: str
) -> tuple[bool, str, list[str], list[Any]]:
    requested = [b for b in facts["backends"] or [] if isinstance(b, str)]
    raw_results = doc.get("backends")
    results: Mapping[str, Any] = raw_results if isinstance(raw_results, Mapping) else {}
    failures = [f"{b}: no result" for b in requested if b not in results]
    for name, block in sorted(results.items()):
        if not all(dig(p, "transfers.within_inventory") for p in _probe_processes(block)):
            failures.append(f"{name}: host/device transfers exceed the declared inventory")
        failures += _instability(name, block)
    raw_acceptance = doc.get("acceptance")
    acceptance: Mapping[str, Any] = raw_acceptance if isinstance(raw_acceptance, Mapping) else {}
    if acceptance.get("passed") is False:
        failures.append("acceptance failed (GPU not idle around a backend)")
    problems = []
    disagreement = first_raw_disagreement(doc)
    if disagreement:
        problems.append(f"{disagreement[0]}: {disagreement[1]}")
    if platform == "linux-cuda" and acceptance.get("passed") is not True:
        problems.append("linux-cuda probe evidence must be an accepted run (probe --acceptance)")
    device = facts["mjwarp_device"] if isinstance(facts["mjwarp_device"], str) else None
    devices = [(b, device if b == "mjwarp" else None) for b in requested]
    detail = "probe measured " + ", ".join(requested) + ("; " + "; ".join(failures) if failures else "")
    return not failures, detail, problems, devices


def _instability(name: str, block: Any) -> list[str]:
    """A backend flagged unstable (its CV over the bound) measured the host's noise, not the backend: it
    does not count. The flag itself is recomputed from the raw samples (a disagreement is a problem)."""
    flag = dig(block, "stability")
    if not isinstance(flag, Mapping) or flag.get("unstable") is not True:
        return []
    reasons = [r for r in flag.get("reasons") or [] if isinstance(r, str)]
    return [f"{name}: unstable ({'; '.join(reasons) or 'no reason given'}); rerun it on a quieter host"]


def _probe_processes(block: Any) -> list[Any]:
    """A backend's worker blocks: ``processes`` from 0.4.0 on, the block itself before (one process)."""
    if isinstance(block, Mapping) and isinstance(block.get("processes"), list):
        return list(block["processes"])
    return [block]


def normalize_artifact(
    entry: Mapping[str, Any], doc: Any, systems: Mapping[str, str] = PLATFORM_SYSTEM
) -> EvidenceFacts:
    """Facts of a filed soak or probe artifact, checked against the shipped schema of its version
    (``systems`` as for :func:`platform_problems`).

    A probe measures environment stepping for a task and its backends, independent of the learner, so
    it covers every entrypoint (algo) of that task and backend, at every rank count; a soak covers only
    the rank count it ran with.
    """
    kind = entry["kind"]
    doc = doc if isinstance(doc, Mapping) else {}
    fields = SOAK_FIELDS if kind == "soak" else PROBE_FIELDS
    facts = {name: _first(doc, *paths) for name, paths in fields.items()}
    problems: list[str] = []
    version = doc.get(VERSION_FIELD[kind])
    version_problem = artifact_version_problem(kind, version)
    if version_problem:
        problems.append(version_problem)
    else:
        problems += schema_errors(doc, ARTIFACT_SCHEMAS[kind][version])
    if kind == "soak":
        passed, detail, own, devices = _soak_outcome(doc, facts)
        algo = facts["algo"] if isinstance(facts["algo"], str) else None
    else:
        passed, detail, own, devices = _probe_outcome(doc, facts, entry["platform"])
        algo = None
    task = facts["task"] if isinstance(facts["task"], str) else None
    if not problems:
        problems += own
        problems += [f"made with a test-only hook: {hook}" for hook in hooks_in(kind, doc)]
        problems += platform_problems(
            entry["platform"],
            None,
            facts["system"] if isinstance(facts["system"], str) else None,
            _as_bool(facts["gpu_available"]),
            devices,
            systems,
        )
    duration = facts.get("duration_s")
    manifest, note = artifact_manifest(kind, doc)
    return EvidenceFacts(
        id=entry["id"],
        kind=kind,
        file=entry["file"],
        platform=entry["platform"],
        lane=None,
        commit=facts["commit"] if isinstance(facts["commit"], str) else None,
        dirty=_as_bool(facts["dirty"]),
        passed=passed,
        status_detail=detail,
        problems=tuple(problems),
        covers=tuple((algo, task, backend) for backend, _ in devices) if task else (),
        ranks=soak_ranks(doc) if kind == "soak" else None,  # a probe measures physics alone: any count
        duration_s=float(duration)
        if isinstance(duration, int | float) and not isinstance(duration, bool)
        else None,
        num_envs=_as_int(facts.get("num_envs")),
        iterations=_as_int(facts.get("iterations")),
        time=unix_to_iso(facts["time"]),
        sampler=sampler_of(doc) if kind == "soak" else "linux",
        unchecked=unchecked_of(doc) if kind == "soak" else (),
        survival=SoakSurvival.of(doc.get("survival")) if kind == "soak" else None,
        inputs=manifest,
        inputs_note=note,
    )


# The processes whose records a manifest needs before it can stand for the whole run: without them it
# would understate what the evidence depends on, so the runtime fingerprint judges it instead.
REQUIRED_ROLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "soak-run": (("trainer", "rank-"), ("collector",), ("monitor",)),
    "soak-monitor": (("monitor",),),
    "probe": (("probe",), ("probe-worker-",)),
}


def artifact_manifest(kind: str, doc: Mapping[str, Any]) -> tuple[InputManifest | None, str | None]:
    """The artifact's input manifest when it records every process it needs, else (None, why)."""
    manifest, note = parse_manifest(doc.get("inputs"))
    if manifest is None:
        return None, note
    # a monitored cell (`soak monitor --cell`) is held to what a `soak run` of its cell records
    role = "probe" if kind == "probe" else "soak-run" if names_cell(doc) else f"soak-{doc.get('mode')}"
    need = REQUIRED_ROLES.get(role, REQUIRED_ROLES["soak-run"])
    missing = [" or ".join(alts) for alts in need if not any(r.startswith(alts) for r in manifest.roles)]
    if missing:
        return None, f"input manifest lacks the record of {', '.join(missing)}"
    return manifest, None


def index_entry_problems(
    entry: Any, position: int, platforms: Sequence[str] = PLATFORMS, lanes: Sequence[str] = LANES
) -> list[str]:
    """Problems of one index entry (field: message) beyond the index schema, which takes any platform and
    lane name: they must be the inventory's (``platforms``, ``lanes``)."""
    if not isinstance(entry, Mapping):
        return [f"entries[{position}]: not an object"]
    out = []
    if entry.get("kind") not in EVIDENCE_KINDS:
        out.append(f"entries[{position}].kind: must be one of {', '.join(EVIDENCE_KINDS)}")
    if entry.get("platform") not in platforms:
        out.append(
            f"entries[{position}].platform: unknown platform {entry.get('platform')!r}; allowed: {', '.join(platforms)}"
        )
    if entry.get("lane") is not None and entry.get("lane") not in lanes:
        out.append(
            f"entries[{position}].lane: unknown lane {entry.get('lane')!r}; allowed: null or {', '.join(lanes)}"
        )
    return out
