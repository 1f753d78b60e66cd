"""``matrix ingest``: validate one piece of evidence and file it under ``matrix/evidence/``.

Accepted: a soak artifact (JSON, with the samples file it names beside it), a probe artifact (JSON), or a
pytest JUnit XML (converted to a JUnit summary). Invalid, failing, dirty or platform-contradicting input,
a soak artifact whose verdicts its own evidence does not bear out (matrix.grading.rederive), and evidence made
with a test-only hook (matrix.grading.hooks: ``probe --test-step-sleep-ms``, ``training.test_*``) are rejected
with a MatrixInputError (exit 2) before anything is written. A soak artifact's samples file is filed
beside it under the name the artifact records (its sha256 is checked first), so `soak report` and
`soak compare` work on filed evidence; a different file already filed under that name is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soakbench.harness.probe.samples import first_raw_disagreement
from soakbench.harness.two_runs.fields import dig
from soakbench.matrix.declared import SourcesOf, runtime_cell_sources
from soakbench.matrix.fileio import write_all_atomic
from soakbench.matrix.freshness import head_commit, resolve_commit, tree_fingerprint
from soakbench.matrix.grading import (
    ARTIFACT_SCHEMAS,
    INDEX_REL,
    INDEX_VERSION,
    JUNIT_SCHEMA,
    VERSION_FIELD,
    FreshnessRule,
    artifact_version_problem,
    attach_bound_tests,
    attach_freshness,
    check_soak_evidence,
    describe_missing,
    detect_kind,
    evidence_roots,
    fingerprint_paths,
    hooks_in,
    load_index,
    manifest_problems,
    normalize_entry,
    read_json,
    samples_file,
    soak_samples_rel,
)
from soakbench.matrix.intake.ingest_inputs import add_junit_inputs
from soakbench.matrix.intake.junit import summarize_junit
from soakbench.matrix.model import (
    LANES,
    PLATFORM_SYSTEM,
    PLATFORMS,
    EvidenceFacts,
    Inventory,
    MatrixInputError,
    cell_property,
    ranks_suffix,
)
from soakbench.matrix.schema_check import validate_or_raise


@dataclass(frozen=True)
class IngestResult:
    """What ingest did: the evidence id, its filed path, whether it was new, and its freshness."""

    id: str
    file: str
    created: bool
    fresh: bool
    covers: tuple[str, ...]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-") or "x"


@dataclass(frozen=True)
class Allowed:
    """The platforms and lanes evidence may be filed for: the inventory's."""

    platforms: tuple[str, ...] = PLATFORMS
    lanes: tuple[str, ...] = LANES


def _prepare(
    source: Path,
    display: str,
    kind: str | None,
    platform: str | None,
    lane: str | None,
    allowed: Allowed,
) -> tuple[str, bytes, str, str | None, Any]:
    """(kind, filed bytes, platform, lane, parsed document) after version and schema checks."""
    if source.suffix.lower() == ".xml" or kind == "junit":
        return _prepare_junit(source, display, kind, (platform, lane), allowed)
    doc = read_json(source, display)
    kind = _artifact_kind(doc, display, kind)
    if lane is not None:
        raise MatrixInputError(display, "--lane", "a lane applies to JUnit evidence only")
    platform = _artifact_platform(doc, display, kind, platform, allowed.platforms)
    version = doc.get(VERSION_FIELD[kind]) if isinstance(doc, dict) else None
    problem = artifact_version_problem(kind, version)
    if problem:
        raise MatrixInputError(display, VERSION_FIELD[kind], problem)
    return kind, source.read_bytes(), platform, None, doc


def _prepare_junit(
    source: Path, display: str, kind: str | None, given: tuple[str | None, str | None], allowed: Allowed
) -> tuple[str, bytes, str, str | None, Any]:
    """A JUnit XML as its summary (``given``: the --platform and --lane options)."""
    if kind not in (None, "junit"):
        raise MatrixInputError(display, "--kind", f"a JUnit XML cannot be ingested as {kind!r}")
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise MatrixInputError(display, "$", f"cannot read: {exc}") from None
    summary = summarize_junit(
        data, display, platform=given[0], lane=given[1], platforms=allowed.platforms, lanes=allowed.lanes
    )
    return (
        "junit",
        (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode(),
        summary["platform"],
        summary["lane"],
        summary,
    )


def _artifact_kind(doc: Any, display: str, kind: str | None) -> str:
    """``soak`` or ``probe``: ``--kind`` if given (it must agree with what the artifact declares)."""
    found = detect_kind(doc)
    if kind is None:
        kind = found
    if kind not in ("soak", "probe"):
        raise MatrixInputError(
            display, "kind", "cannot tell whether this is a soak or a probe artifact; pass --kind"
        )
    if found is not None and found != kind:
        raise MatrixInputError(display, "kind", f"the artifact declares itself {found!r}, not {kind!r}")
    return kind


def _artifact_platform(
    doc: Any, display: str, kind: str, platform: str | None, platforms: tuple[str, ...] = PLATFORMS
) -> str:
    """The platform the artifact records or ``--platform`` gives; both, when given, must agree, and it
    must be one of the inventory's ``platforms``."""
    declared = doc.get("platform") if isinstance(doc, dict) else None
    if isinstance(declared, str) and platform is not None and declared != platform:
        raise MatrixInputError(
            display, "platform", f"the artifact records {declared!r} but --platform {platform!r}"
        )
    platform = platform or (declared if isinstance(declared, str) else None)
    if platform not in platforms:
        raise MatrixInputError(
            display, "--platform", f"required for {kind} evidence; allowed: {', '.join(platforms)}"
        )
    return platform


def _subject(kind: str, facts: EvidenceFacts) -> str:
    if kind == "junit":
        return f"lane-{facts.lane}"
    algos = sorted({a or "any" for a, _, _ in facts.covers})
    tasks = sorted({t for _, t, _ in facts.covers})
    backends = sorted({b for _, _, b in facts.covers})
    ranks = [f"{facts.ranks}ranks"] if facts.ranks is not None and facts.ranks > 1 else []
    return "_".join(["+".join(algos), "+".join(tasks), "+".join(backends), *ranks])


def _check_document(source: Path, display: str, kind: str, doc: Any) -> None:
    """Schema, test-only hooks, and what the document's own evidence bears out (soak verdicts re-derived,
    probe summaries recomputed from their raw samples)."""
    schema_name = JUNIT_SCHEMA if kind == "junit" else ARTIFACT_SCHEMAS[kind][doc[VERSION_FIELD[kind]]]
    validate_or_raise(doc, schema_name, display)
    if hooks := hooks_in(kind, doc):
        raise MatrixInputError(
            display,
            hooks[0].partition(":")[0],
            f"made with a test-only hook ({'; '.join(hooks)}); evidence must come from a run without "
            "test hooks: rerun without them, then ingest",
        )
    if kind == "soak":  # trust no self-declared verdict: re-derive it from the artifact's own evidence
        check_soak_evidence(source, display, doc)
    if kind == "probe" and (disagreement := first_raw_disagreement(doc)):
        raise MatrixInputError(display, *disagreement)


def ingest(  # noqa: PLR0913 — the CLI options (keyword-only), the cell sources and the inventory
    repo: Path,
    source: Path,
    *,
    kind: str | None = None,
    platform: str | None = None,
    lane: str | None = None,
    sources_of: SourcesOf = runtime_cell_sources,
    inventory: Inventory | None = None,
) -> IngestResult:
    """Validate ``source`` and file it with an index entry; raises MatrixInputError, writing nothing.
    ``sources_of`` names a cell's sources (the guard on manifests, a JUnit summary's per-cell inputs);
    ``inventory``: a project's own (its platforms and freshness rule), None for this runtime's."""
    display = str(source)
    allowed = Allowed(inventory.platforms, inventory.lanes) if inventory is not None else Allowed()
    kind, filed, platform, lane, doc = _prepare(source, display, kind, platform, lane, allowed)
    if kind == "junit":  # each bound cell's inputs, from the commit its tests ran at
        _known_commit(repo, display, doc["source"]["commit"])
        add_junit_inputs(repo, doc, sources_of)
        filed = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    _check_document(source, display, kind, doc)
    sha = hashlib.sha256(filed).hexdigest()
    draft = {
        "id": "pending",
        "kind": kind,
        "file": "pending",
        "sha256": sha,
        "platform": platform,
        "lane": lane,
    }
    facts = normalize_entry(draft, filed, inventory.systems if inventory is not None else PLATFORM_SYSTEM)
    if facts.problems:
        raise MatrixInputError(
            display, problem_field(facts.problems[0]), "rejected: " + "; ".join(facts.problems)
        )
    if not facts.passed:
        raise MatrixInputError(display, "status", f"failing evidence is not filed: {facts.status_detail}")
    if facts.dirty is not False:
        raise MatrixInputError(
            display, "dirty", "produced from a tree with uncommitted changes; commit, rerun, then ingest"
        )
    if inventory is not None and kind != "junit":
        _check_cells(display, kind, doc, facts, inventory)
    _guard_manifest(repo, display, kind, doc, facts, sources_of)
    facts = _fresh(repo, facts, inventory)
    if kind == "junit":
        _refuse_incomplete(display, attach_bound_tests(repo, facts))
    ev_id = "-".join([kind, platform, _slug(_subject(kind, facts)), (facts.commit or "")[:12], sha[:12]])
    rel = f"matrix/evidence/{kind}/{ev_id}.json"
    suffix = ranks_suffix(facts.ranks) if facts.ranks is not None else ""
    covers = tuple(sorted(f"{a or '*'}/{t}/{b}{suffix}" for a, t, b in facts.covers)) or tuple(
        sorted(cell_property(*k) for k in facts.tests)
    )
    entries = load_index(repo)
    if any(e["id"] == ev_id for e in entries):
        return IngestResult(ev_id, rel, False, facts.fresh, covers)
    entry = {"id": ev_id, "kind": kind, "file": rel, "sha256": sha, "platform": platform, "lane": lane}
    index: dict[str, Any] = {
        "schema_version": INDEX_VERSION,
        "entries": sorted([*entries, entry], key=lambda e: e["id"]),
    }
    if (repo / rel).exists():
        raise MatrixInputError(
            rel, "$", "a file with this evidence id exists but is not indexed; remove it first"
        )
    files = {
        repo / rel: filed,
        repo / INDEX_REL: (json.dumps(index, indent=2, sort_keys=True) + "\n").encode(),
    }
    if kind == "soak":
        files.update(_samples_to_file(repo, source, rel, doc))
    write_all_atomic(files)
    return IngestResult(ev_id, rel, True, facts.fresh, covers)


def problem_field(problem: str) -> str:
    """The field an ingest refusal names for its first problem: the one a schema error names, the cell
    a monitored soak does not record, the platform a recorded fact contradicts, else the document."""
    field, sep, _ = problem.partition(": ")
    if sep and " " not in field:
        return field
    if "--cell" in problem:
        return "run_settings.cell"
    return "platform" if "platform" in problem or "cannot be " in problem else "$"


def _fresh(repo: Path, facts: EvidenceFacts, inventory: Inventory | None) -> EvidenceFacts:
    """``facts`` with freshness judged as ``matrix generate`` will (a project's own rule when given)."""
    if inventory is None:
        return attach_freshness(repo, facts, tree_fingerprint(repo, head_commit(repo)))
    paths = fingerprint_paths(inventory)
    rule = FreshnessRule(paths, evidence_roots(inventory, facts))
    return attach_freshness(repo, facts, tree_fingerprint(repo, head_commit(repo), paths), rule)


def _refuse_incomplete(display: str, facts: EvidenceFacts) -> None:
    """A JUnit summary must hold every test its commit binds to each cell it records: a lane that
    deselected one (``-k``, ``-m``, a narrower path) would grade the cell on the rest."""
    incomplete = sorted(facts.missing_tests.items())
    if not incomplete:
        return
    said = "; ".join(
        f"{cell_property(*b)}: {describe_missing(labels, facts.commit or '')}" for b, labels in incomplete
    )
    raise MatrixInputError(
        display,
        f"cells[{cell_property(*incomplete[0][0])}].tests",
        f"{said}; run the lane without deselecting bound tests",
    )


def _check_cells(display: str, kind: str, doc: Any, facts: EvidenceFacts, inventory: Inventory) -> None:
    """A soak or probe for a project's own inventory must cover one of its cells on its platform: a
    mistyped ``soak monitor --cell`` would otherwise be filed and count for nothing."""
    keys = [c.key for c in inventory.cells if c.key.platform == facts.platform]
    if any(facts.covers_cell(key) for key in keys):
        return
    if kind == "soak":
        field = "run_settings.cell" if dig(doc, "run_settings.cell") is not None else "run_settings"
    else:
        field = "settings.task"
    said = ", ".join(f"{a or '*'}/{t}/{b}" for a, t, b in facts.covers) or "no cell"
    allowed = sorted({f"{k.algo}/{k.task}/{k.backend}{ranks_suffix(k.ranks)}" for k in keys})
    raise MatrixInputError(
        display,
        field,
        f"{said} names no cell of the inventory on {facts.platform}; allowed: {', '.join(allowed) or 'none'}",
    )


def _known_commit(repo: Path, display: str, commit: str) -> None:
    if resolve_commit(repo, commit) is None:
        raise MatrixInputError(
            display,
            "property matrix.commit",
            f"commit {commit!r} is not in HEAD's history (unknown, or a shallow clone: git fetch --unshallow)",
        )


def _guard_manifest(
    repo: Path, display: str, kind: str, doc: Any, facts: EvidenceFacts, sources_of: SourcesOf
) -> None:
    """Refuse a manifest that omits a module its cell's own code loads at module level, or records a file
    at a blob its commit does not hold (``generate`` and ``check`` run the same guard on filed evidence)."""
    if problems := manifest_problems(repo, kind, doc, facts, sources_of):
        field, _, why = problems[0].partition(": ")
        raise MatrixInputError(display, field, f"{why}. Re-collect it with this project's soak/probe")


def _samples_to_file(repo: Path, source: Path, rel: str, doc: dict[str, Any]) -> dict[Path, bytes]:
    """The soak artifact's samples (already checked against its sha256) under their filed path."""
    data = samples_file(source, doc).read_bytes()
    target = repo / soak_samples_rel(rel, str(doc["samples_path"]))
    if target.exists() and target.read_bytes() != data:
        raise MatrixInputError(
            str(source),
            "samples_path",
            f"a different samples file is filed as {target.relative_to(repo)}; give the soak a unique "
            "--output name (the collection script adds the commit)",
        )
    return {target: data}
