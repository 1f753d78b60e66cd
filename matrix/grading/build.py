"""Edges of the matrix: read the inventory, the evidence index and filed evidence, ask git about
freshness, ask the runtime for the backends' capabilities, note which linked pages exist, and grade
every cell (grading itself is pure, in matrix.grading.policy)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from soakbench.foundation.inputs import git_blob_id
from soakbench.matrix.declared import CapabilityRow, FactsSource, SourcesOf, derived_manifest
from soakbench.matrix.freshness import (
    FINGERPRINT_PATHS,
    commit_reader,
    head_commit,
    head_inputs,
    judge_inputs,
    resolve_commit,
    tree_blobs,
    tree_fingerprint,
)
from soakbench.matrix.freshness.filed_history import filed_history
from soakbench.matrix.grading.bound_tests import BoundTest, bound_tests, completeness
from soakbench.matrix.grading.evidence import (
    INDEX_REL,
    INDEX_SCHEMA,
    INDEX_VERSION,
    index_entry_problems,
    normalize_artifact,
    normalize_junit,
)
from soakbench.matrix.grading.manifest_guard import manifest_problems
from soakbench.matrix.grading.policy import grade_cell
from soakbench.matrix.grading.rederive import check_soak_evidence
from soakbench.matrix.grading.write_once import rewrite_problems
from soakbench.matrix.model import (
    GRADE_MEANING,
    LANES,
    PLATFORM_SYSTEM,
    PLATFORMS,
    Binding,
    CellResult,
    EvidenceFacts,
    Inventory,
    MatrixInputError,
)
from soakbench.matrix.schema_check import validate_or_raise


@dataclass(frozen=True)
class MatrixState:
    """Everything the renderers need: graded cells, normalized evidence, HEAD's runtime fingerprint,
    the backends' capabilities per platform and the repo-relative pages the matrix links to: the probe
    history (None when it does not exist) and each soak's HTML report by evidence id."""

    inventory: Inventory
    evidence: tuple[EvidenceFacts, ...]
    results: tuple[CellResult, ...]
    head_fingerprint: str
    capabilities: tuple[CapabilityRow, ...] = ()
    probe_history: str | None = None
    soak_reports: dict[str, str] = field(default_factory=dict)
    meanings: Mapping[str, str] = field(default_factory=lambda: dict(GRADE_MEANING))  # the facts source's


def read_json(path: Path, display: str) -> Any:
    """Parse a JSON file; unreadable or malformed JSON is an input error naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixInputError(display, "$", "file not found") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MatrixInputError(display, "$", f"malformed JSON: {exc}") from None


def load_index(repo: Path) -> list[dict[str, Any]]:
    """Entries of ``matrix/evidence/index.json`` (empty when the index does not exist yet)."""
    path = repo / INDEX_REL
    if not path.exists():
        return []
    doc = read_json(path, INDEX_REL)
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if isinstance(version, int) and version > INDEX_VERSION:
        raise MatrixInputError(
            INDEX_REL,
            "schema_version",
            f"future schema version {version}; this generator reads {INDEX_VERSION}",
        )
    validate_or_raise(doc, INDEX_SCHEMA, INDEX_REL)
    entries: list[dict[str, Any]] = doc["entries"]
    seen: set[str] = set()
    for position, entry in enumerate(entries):
        if entry["id"] in seen:
            raise MatrixInputError(
                INDEX_REL, f"entries[{position}].id", f"duplicate evidence id {entry['id']!r}"
            )
        seen.add(entry["id"])
    return entries


def normalize_entry(
    entry: dict[str, Any], raw: bytes, systems: Mapping[str, str] = PLATFORM_SYSTEM
) -> EvidenceFacts:
    """Facts of one filed evidence file given its bytes (pure: no git, no files); ``systems``: per
    platform of the inventory, the host system its evidence must record."""
    doc: Any = None
    parse_problem: str | None = None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        parse_problem = f"malformed JSON: {exc}"
    if entry["kind"] == "junit":
        facts = normalize_junit(entry, doc if isinstance(doc, dict) else {}, systems)
    else:
        facts = normalize_artifact(entry, doc if isinstance(doc, dict) else {}, systems)
    problems = list(facts.problems)
    if parse_problem:
        problems.insert(0, parse_problem)
    if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        problems.insert(0, "file content differs from the sha256 recorded at ingest (edited by hand?)")
    return replace(facts, problems=tuple(problems))


def commit_field(kind: str) -> str:
    """Where the commit lives in a document of ``kind`` (for error messages)."""
    return "source.commit" if kind == "junit" else "context.source.commit"


@dataclass(frozen=True)
class FreshnessRule:
    """How evidence is judged beyond its own manifest: the fingerprint's paths (for evidence without a
    manifest) and, for a project's own inventory, the input roots a manifest is derived from."""

    paths: tuple[str, ...] = FINGERPRINT_PATHS
    roots: tuple[str, ...] = ()


def attach_freshness(
    repo: Path, facts: EvidenceFacts, head_fp: str, rule: FreshnessRule | None = None
) -> EvidenceFacts:
    """Resolve the evidence commit (must be in HEAD's history) and judge its freshness: by its input
    manifest, one derived from ``rule.roots`` when it records none, else by the fingerprint."""
    rule = rule or FreshnessRule()
    if facts.commit is None:
        return replace(facts, problems=(*facts.problems, "the evidence does not record its commit"))
    full = resolve_commit(repo, facts.commit)
    if full is None:
        raise MatrixInputError(
            facts.file,
            commit_field(facts.kind),
            f"commit {facts.commit!r} is not in HEAD's history (unknown, or a shallow clone: git fetch --unshallow)",
        )
    fingerprint = tree_fingerprint(repo, full, rule.paths)
    facts = replace(facts, fingerprint=fingerprint)
    if facts.inputs is None and not facts.cell_inputs and rule.roots and facts.kind != "junit":
        derived = derived_manifest(tree_blobs(repo, full), rule.roots)
        facts = replace(facts, inputs=derived, inputs_note=None if derived else facts.inputs_note)
    if facts.inputs is None and not facts.cell_inputs:
        fresh = fingerprint == head_fp
        why = f"runtime fingerprint at {full[:12]} differs from HEAD's (the evidence records no usable input manifest)"
        return replace(facts, fresh=fresh, stale={} if fresh else {None: why})
    return judge_inputs(facts, head_inputs(repo), full[:12], fingerprint == head_fp)


def load_evidence(
    repo: Path, head_fp: str, sources_of: SourcesOf, inventory: Inventory | None = None
) -> tuple[EvidenceFacts, ...]:
    """Every indexed evidence file, normalized, held to every guard ``matrix ingest`` runs and to
    write-once, with freshness (judged by ``inventory``'s rules: a project's input roots and fingerprint
    paths; this runtime's when None). ``sources_of`` names a cell's sources for the manifest guard."""
    out = []
    platforms, lanes = (inventory.platforms, inventory.lanes) if inventory is not None else (PLATFORMS, LANES)
    systems = inventory.systems if inventory is not None else PLATFORM_SYSTEM
    head = head_commit(repo)  # a full id: tree reads are cached by the commit they name
    history, committed = filed_history(repo, head), tree_blobs(repo, head)
    for position, entry in enumerate(load_index(repo)):
        if problems := index_entry_problems(entry, position, platforms, lanes):
            field, _, message = problems[0].partition(": ")
            raise MatrixInputError(INDEX_REL, field, message)
        raw = _filed_bytes(repo, entry["file"], f"entries[{position}].file")
        facts = rederived(repo / entry["file"], normalize_entry(entry, raw, systems), raw)
        rewritten = rewrite_problems(_filed_pieces(repo, entry, raw), history, committed)
        guarded = (
            [] if facts.problems else manifest_problems(repo, facts.kind, _document(raw), facts, sources_of)
        )
        facts = replace(facts, problems=(*facts.problems, *rewritten, *guarded))
        rule = (
            None
            if inventory is None
            else FreshnessRule(fingerprint_paths(inventory), evidence_roots(inventory, facts))
        )
        out.append(attach_bound_tests(repo, attach_freshness(repo, facts, head_fp, rule)))
    return tuple(sorted(out, key=lambda ev: ev.id))


def _document(raw: bytes) -> dict[str, Any]:
    """A filed document already known to parse and validate (its facts have no problems)."""
    doc = json.loads(raw)
    return doc if isinstance(doc, dict) else {}


def _filed_bytes(repo: Path, rel: str, field: str) -> bytes:
    try:
        return (repo / rel).read_bytes()
    except OSError as exc:
        raise MatrixInputError(INDEX_REL, field, f"cannot read {rel}: {exc}") from None


def _filed_pieces(repo: Path, entry: Mapping[str, Any], raw: bytes) -> dict[str, str]:
    """The files filed for one index entry (the evidence, and a soak's samples) -> blob ids of their bytes."""
    pieces = {entry["file"]: git_blob_id(raw)}
    samples = filed_samples_rel(repo, entry["file"]) if entry["kind"] == "soak" else None
    if samples is not None:
        pieces[samples] = git_blob_id((repo / samples).read_bytes())
    return pieces


#: Where a repository's tests live; the cell markers are read from the ``.py`` files under it.
TESTS_ROOT = "tests/"


@cache
def _bound_tests_cached(repo: str, commit: str) -> dict[Binding, tuple[BoundTest, ...]]:
    paths = [p for p in tree_blobs(Path(repo), commit) if p.startswith(TESTS_ROOT) and p.endswith(".py")]
    read = commit_reader(Path(repo), commit)
    return bound_tests({p: (read(p) or b"").decode("utf-8", errors="replace") for p in paths})


def bound_tests_at(repo: Path, commit: str) -> dict[Binding, tuple[BoundTest, ...]]:
    """The tests bound to each cell by the sources of ``commit`` (read once per commit)."""
    return _bound_tests_cached(str(repo.resolve()), commit)


def attach_bound_tests(repo: Path, facts: EvidenceFacts) -> EvidenceFacts:
    """A JUnit summary held against the tests its commit's sources bind to each cell it records: which it
    lacks, and their kinds (``attach_freshness`` has resolved the commit, or recorded why it cannot)."""
    if facts.kind != "junit" or facts.commit is None:
        return facts
    full = resolve_commit(repo, facts.commit)
    if full is None:
        return facts
    found = completeness(bound_tests_at(repo, full), facts.test_ids)
    return replace(facts, missing_tests=found.missing, bound_kinds=found.kinds)


def rederived(path: Path, facts: EvidenceFacts, raw: bytes) -> EvidenceFacts:
    """A filed soak artifact's verdicts re-derived from its filed samples with HEAD's verdict code, which
    is why verdict code is no input of the evidence: a verdict HEAD's code does not reach makes the
    evidence invalid, saying where they differ."""
    if facts.kind != "soak" or facts.problems:
        return facts
    try:
        check_soak_evidence(path, facts.file, json.loads(raw))
    except MatrixInputError as exc:
        reason = str(exc).removeprefix(f"{facts.file}: ")
        return replace(facts, problems=(f"HEAD's verdict code re-derives a different verdict: {reason}",))
    return facts


PROBE_HISTORY_REL = "reports/probe-history.html"


def soak_report_rel(evidence_file: str) -> str:
    """Where ``soak report`` puts a filed soak artifact's HTML report: beside it, same stem."""
    return str(Path(evidence_file).with_suffix(".html").as_posix())


def soak_samples_rel(evidence_file: str, samples_path: str) -> str:
    """Where a filed soak artifact's samples live: beside it, under the file name the artifact records
    (``soak report`` and ``soak compare`` look there when the recorded path is gone)."""
    return str((Path(evidence_file).parent / Path(samples_path).name).as_posix())


def filed_samples_rel(repo: Path, evidence_file: str) -> str | None:
    """The samples file filed with a soak evidence file, or None when there is none (older evidence)."""
    try:
        recorded = json.loads((repo / evidence_file).read_text()).get("samples_path")
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, str) or not recorded:
        return None
    rel = soak_samples_rel(evidence_file, recorded)
    return rel if (repo / rel).is_file() else None


def linked_pages(repo: Path, evidence: tuple[EvidenceFacts, ...]) -> tuple[str | None, dict[str, str]]:
    """The probe history page and the soak reports that exist in ``repo`` (only existing pages are linked)."""
    history = PROBE_HISTORY_REL if (repo / PROBE_HISTORY_REL).is_file() else None
    reports = {
        ev.id: soak_report_rel(ev.file)
        for ev in evidence
        if ev.kind == "soak" and (repo / soak_report_rel(ev.file)).is_file()
    }
    return history, reports


def grade_all(
    inventory: Inventory, evidence: tuple[EvidenceFacts, ...], facts: FactsSource
) -> tuple[CellResult, ...]:
    """Grade every inventory cell against ``evidence``, Registered and Configured asked of ``facts``."""
    results = []
    for policy in inventory.cells:
        key = policy.key
        registered = facts.registered(key)
        configured_reason = facts.configured(key) if registered is None else "not registered"
        results.append(grade_cell(policy, registered, configured_reason, evidence, inventory.canonical_soak))
    return tuple(results)


def fingerprint_paths(inventory: Inventory) -> tuple[str, ...]:
    """The paths whose trees judge evidence without a manifest: this runtime's, or a project's inputs."""
    return inventory.project.inputs if inventory.project is not None else FINGERPRINT_PATHS


def evidence_roots(inventory: Inventory, ev: EvidenceFacts) -> tuple[str, ...]:
    """A project's input roots of the cells ``ev`` covers on its platform (the project's own when it
    covers none); () for this runtime's inventory, whose evidence has no roots."""
    if inventory.project is None:
        return ()
    keys = [c.key for c in inventory.cells if c.key.platform == ev.platform and ev.covers_cell(c.key)]
    roots = {r for key in keys for r in inventory.roots_of(key)}
    return tuple(sorted(roots or inventory.project.inputs))


def compute(repo: Path, inventory: Inventory, facts: FactsSource) -> MatrixState:
    """Read the evidence of ``repo`` and grade every cell of its (loaded) ``inventory``."""
    paths = fingerprint_paths(inventory)
    head_fp = tree_fingerprint(repo, head_commit(repo), paths)
    evidence = load_evidence(repo, head_fp, facts.cell_sources, inventory)
    history, reports = linked_pages(repo, evidence)
    return MatrixState(
        inventory,
        evidence,
        grade_all(inventory, evidence, facts),
        head_fp,
        facts.capabilities(inventory),
        history,
        reports,
        facts.meanings(),
    )
