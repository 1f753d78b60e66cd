"""``matrix prune``: drop surplus historical evidence from ``matrix/evidence/`` (git history keeps it).

Historical evidence (a runtime fingerprint other than HEAD's) never counts again, yet every collection
adds a copy per cell. Pruning keeps the newest ``keep`` historical pieces per (cell, kind, platform) (the
cell with its rank count: a 2-rank soak never stands in for a single-rank one) and
removes the rest with their index entries and soak reports; fresh and invalid evidence always stays.
"Newest" is by git history: the fewest commits between the evidence's commit and HEAD. The selection is
pure; :func:`apply_prune` writes the new index and the regenerated pages as one unit, then deletes the
files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from soakbench.matrix.fileio import write_all_atomic
from soakbench.matrix.freshness import commits_since
from soakbench.matrix.grading import (
    INDEX_REL,
    INDEX_VERSION,
    MatrixState,
    filed_samples_rel,
    freshness,
    load_index,
    soak_report_rel,
)
from soakbench.matrix.model import CellKey, CellResult, EvidenceFacts
from soakbench.matrix.publishing import render_all

# ``matrix check`` warns above this many historical evidence files (docs/support-matrix.md, "Pruning
# historical evidence").
HISTORICAL_WARN_LIMIT = 40
DEFAULT_KEEP = 1
Group = tuple[str, str, str, int, str, str]  # (algo, task, backend, ranks, platform, kind)
Regrade = Callable[[tuple[EvidenceFacts, ...]], tuple[CellResult, ...]]


@dataclass(frozen=True)
class PrunePlan:
    """The evidence to remove and the evidence that stays (in the store's order)."""

    remove: tuple[EvidenceFacts, ...]
    keep: tuple[EvidenceFacts, ...]


def groups(ev: EvidenceFacts, keys: Sequence[CellKey]) -> set[Group]:
    """The (cell, kind, platform) groups ``ev`` belongs to: each declared algo/task/backend and rank
    count it covers, on the platform it was recorded for; evidence covering no declared cell forms its
    own group (rank count 0: none)."""
    found = {(*k.binding(), ev.platform, ev.kind) for k in keys if ev.covers_cell(k)}
    return found or {("*", "*", "*", 0, ev.platform, ev.kind)}


def plan_prune(
    evidence: Sequence[EvidenceFacts], keys: Sequence[CellKey], keep: int, age: Mapping[str, int]
) -> PrunePlan:
    """Keep every fresh and invalid piece, and per group the ``keep`` newest historical ones (``age``:
    evidence id -> commits since its commit; ties go to the later id); a piece kept for one group stays
    for all of its groups."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    kept_in: dict[Group, int] = {}
    staying: set[str] = set()
    historical = [ev for ev in evidence if freshness(ev) == "historical"]
    newest_first = sorted(sorted(historical, key=lambda ev: ev.id, reverse=True), key=lambda ev: age[ev.id])
    for ev in newest_first:
        mine = groups(ev, keys)
        if any(kept_in.get(g, 0) < keep for g in mine):
            staying.add(ev.id)
            for g in mine:
                kept_in[g] = kept_in.get(g, 0) + 1
    remove = tuple(ev for ev in historical if ev.id not in staying)
    gone = {ev.id for ev in remove}
    return PrunePlan(remove, tuple(ev for ev in evidence if ev.id not in gone))


def evidence_age(repo: Path, evidence: Sequence[EvidenceFacts]) -> dict[str, int]:
    """Commits since each historical piece's commit (the order :func:`plan_prune` keeps by)."""
    return {
        ev.id: commits_since(repo, ev.commit)
        for ev in evidence
        if freshness(ev) == "historical" and ev.commit is not None
    }


def historical_count(evidence: Sequence[EvidenceFacts]) -> int:
    """How many filed pieces of evidence are historical."""
    return sum(freshness(ev) == "historical" for ev in evidence)


def store_warning(evidence: Sequence[EvidenceFacts], limit: int | None = None) -> str | None:
    """The ``matrix check`` warning when the store holds more than ``limit`` (default
    :data:`HISTORICAL_WARN_LIMIT`) historical files."""
    limit = HISTORICAL_WARN_LIMIT if limit is None else limit
    count = historical_count(evidence)
    if count <= limit:
        return None
    return (
        f"matrix/evidence/ holds {count} historical evidence files (more than {limit}); "
        "run: uv run matrix prune, then commit (git history keeps the removed files)"
    )


def pruned_state(state: MatrixState, plan: PrunePlan, regrade: Regrade) -> MatrixState:
    """``state`` without the removed evidence, regraded (grades stay: historical evidence never counts)."""
    gone = {ev.id for ev in plan.remove}
    return replace(
        state,
        evidence=plan.keep,
        results=regrade(plan.keep),
        soak_reports={k: v for k, v in state.soak_reports.items() if k not in gone},
    )


def _index_bytes(entries: list[dict[str, object]]) -> bytes:
    index = {"schema_version": INDEX_VERSION, "entries": entries}
    return (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()


def _filed_with(repo: Path, kind: str, evidence_file: str, shared: set[str]) -> list[str]:
    """The evidence file and what was filed beside it (a soak's report, and its samples unless kept
    evidence names the same samples file: identical samples are filed once)."""
    if kind != "soak":
        return [evidence_file]
    samples = filed_samples_rel(repo, evidence_file)  # read before the artifact itself is deleted
    extra = [samples] if samples and samples not in shared else []
    return [evidence_file, soak_report_rel(evidence_file), *extra]


def apply_prune(repo: Path, state: MatrixState, plan: PrunePlan, page: str, regrade: Regrade) -> list[str]:
    """Write the pruned index and the regenerated outputs as one unit, then delete the removed files
    (each evidence file and, for a soak, its report and samples, if filed); returns the repo-relative
    paths deleted."""
    gone = {ev.id for ev in plan.remove}
    entries = [e for e in load_index(repo) if e["id"] not in gone]
    outputs = render_all(pruned_state(state, plan, regrade), page)
    files = {repo / rel: text.encode() for rel, text in outputs.items()}
    files[repo / INDEX_REL] = _index_bytes(entries)
    write_all_atomic(files)
    kept_samples = {filed_samples_rel(repo, ev.file) for ev in plan.keep if ev.kind == "soak"}
    shared = {rel for rel in kept_samples if rel is not None}
    deleted: list[str] = []
    for ev in plan.remove:
        for rel in _filed_with(repo, ev.kind, ev.file, shared):
            path = repo / rel
            if path.is_file():
                path.unlink()
                deleted.append(rel)
    return deleted
