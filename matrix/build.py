"""Edges of the matrix: read the inventory, the evidence index and filed evidence, ask git about
freshness, and grade every cell (grading itself is pure, in matrix.grading)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from matrix.evidence import (
    INDEX_REL,
    INDEX_SCHEMA,
    INDEX_VERSION,
    normalize_artifact,
    normalize_junit,
)
from matrix.gitfacts import head_commit, resolve_commit, runtime_fingerprint
from matrix.grading import CellResult, grade_cell
from matrix.inventory import load_inventory
from matrix.model import EvidenceFacts, Inventory, MatrixInputError
from matrix.runtime_facts import ConfiguredCheck, Registry
from matrix.schema_check import validate_or_raise


@dataclass(frozen=True)
class MatrixState:
    """Everything the renderers need: graded cells, normalized evidence, HEAD's runtime fingerprint."""

    inventory: Inventory
    evidence: tuple[EvidenceFacts, ...]
    results: tuple[CellResult, ...]
    head_fingerprint: str


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


def normalize_entry(entry: dict[str, Any], raw: bytes) -> EvidenceFacts:
    """Facts of one filed evidence file given its bytes (pure: no git, no files)."""
    doc: Any = None
    parse_problem: str | None = None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        parse_problem = f"malformed JSON: {exc}"
    if entry["kind"] == "junit":
        facts = normalize_junit(entry, doc if isinstance(doc, dict) else {})
    else:
        facts = normalize_artifact(entry, doc if isinstance(doc, dict) else {})
    problems = list(facts.problems)
    if parse_problem:
        problems.insert(0, parse_problem)
    if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        problems.insert(0, "file content differs from the sha256 recorded at ingest (edited by hand?)")
    return replace(facts, problems=tuple(problems))


def commit_field(kind: str) -> str:
    """Where the commit lives in a document of ``kind`` (for error messages)."""
    return "source.commit" if kind == "junit" else "context.source.commit"


def attach_freshness(repo: Path, facts: EvidenceFacts, head_fp: str) -> EvidenceFacts:
    """Resolve the evidence commit (must be in HEAD's history) and compare runtime fingerprints."""
    if facts.commit is None:
        return replace(facts, problems=(*facts.problems, "the evidence does not record its commit"))
    full = resolve_commit(repo, facts.commit)
    if full is None:
        raise MatrixInputError(
            facts.file,
            commit_field(facts.kind),
            f"commit {facts.commit!r} is not in HEAD's history (unknown, or a shallow clone: git fetch --unshallow)",
        )
    fingerprint = runtime_fingerprint(repo, full)
    return replace(facts, fingerprint=fingerprint, fresh=fingerprint == head_fp)


def load_evidence(repo: Path, head_fp: str) -> tuple[EvidenceFacts, ...]:
    """Every indexed evidence file, normalized, with freshness."""
    out = []
    for position, entry in enumerate(load_index(repo)):
        path = repo / entry["file"]
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise MatrixInputError(
                INDEX_REL, f"entries[{position}].file", f"cannot read {entry['file']}: {exc}"
            ) from None
        out.append(attach_freshness(repo, normalize_entry(entry, raw), head_fp))
    return tuple(sorted(out, key=lambda ev: ev.id))


def registered_reason(registry: Registry, algo: str, task: str, backend: str) -> str | None:
    """None when algo, task and backend are all registered; otherwise which is missing."""
    missing = [
        f"{what} {name!r} is not registered"
        for what, name, names in (
            ("entrypoint", algo, registry.algos),
            ("task", task, registry.tasks),
            ("backend", backend, registry.backends),
        )
        if name not in names
    ]
    return "; ".join(missing) or None


def compute(repo: Path, registry: Registry, configured: ConfiguredCheck) -> MatrixState:
    """Read all inputs of ``repo`` and grade every inventory cell."""
    inventory = load_inventory(repo, registry)
    head_fp = runtime_fingerprint(repo, head_commit(repo))
    evidence = load_evidence(repo, head_fp)
    results = []
    for policy in inventory.cells:
        key = policy.key
        registered = registered_reason(registry, key.algo, key.task, key.backend)
        configured_reason = configured(key) if registered is None else "not registered"
        results.append(grade_cell(policy, registered, configured_reason, evidence, inventory.canonical_soak))
    return MatrixState(inventory, evidence, tuple(results), head_fp)
