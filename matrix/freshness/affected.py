"""Which cells a change stales, and which cells need evidence collected (pure: trees and evidence come in).

A change stales a cell's evidence of one kind when that evidence was fresh before the change and one of
its inputs is among the changed files (or, for evidence without an input manifest, the change touches
the fingerprint's paths: this runtime's, or a project's own input roots). ``matrix affected`` prints them; ``matrix stale`` lists the cells
whose evidence of a kind does not count at HEAD, which is what an incremental collection collects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from soakbench.matrix.freshness.gitfacts import FINGERPRINT_PATHS
from soakbench.matrix.freshness.head import HeadInputs
from soakbench.matrix.model import CellKey, CellResult, EvidenceFacts, InputManifest


@dataclass(frozen=True)
class TreeState:
    """One side of a change: its inputs (every file's blob id, the lock, what picks the interpreter), and
    the fingerprint over ``paths`` (this runtime's, or a project's own input roots) that judges evidence
    without a manifest."""

    inputs: HeadInputs
    fingerprint: str
    paths: tuple[str, ...] = FINGERPRINT_PATHS

    @property
    def blobs(self) -> Mapping[str, str]:
        """Every file's blob id."""
        return self.inputs.blobs


@dataclass(frozen=True, order=True)
class Affected:
    """A cell whose evidence of ``kind`` the change stales, ``evidence`` the piece, ``cause`` the first
    changed input."""

    key: CellKey
    kind: str
    evidence: str
    cause: str


def _manifest_for(ev: EvidenceFacts, key: CellKey) -> InputManifest | None:
    return ev.cell_inputs.get(key.binding()) if ev.kind == "junit" else ev.inputs


def touches_fingerprint(paths: Iterable[str], roots: Sequence[str] = FINGERPRINT_PATHS) -> str | None:
    """The first of ``paths`` under the fingerprint's ``roots`` (a folder root may end in ``/``), or None."""
    for path in sorted(paths):
        if any(path == r.rstrip("/") or path.startswith(f"{r.rstrip('/')}/") for r in roots):
            return path
    return None


def _cause(
    manifest: InputManifest | None, ev: EvidenceFacts, before: TreeState, after: TreeState
) -> str | None:
    """The first input of the evidence that the change alters, given that the evidence was fresh before
    it (None: it was historical already, or the change leaves it fresh)."""
    if manifest is None:
        if ev.fingerprint != before.fingerprint:
            return None
        changed = (
            p for p in set(before.blobs) | set(after.blobs) if before.blobs.get(p) != after.blobs.get(p)
        )
        path = touches_fingerprint(changed, after.paths)
        return f"{path} (no input manifest: any change under {', '.join(after.paths)})" if path else None
    if before.inputs.changes(manifest):
        return None
    now = after.inputs.changes(manifest)
    return now[0].name if now else None


def affected_cells(
    results: Sequence[CellResult], evidence: Sequence[EvidenceFacts], before: TreeState, after: TreeState
) -> list[Affected]:
    """Per declared supported cell and evidence kind, the evidence fresh before the change that the
    change makes historical."""
    by_id = {ev.id: ev for ev in evidence}
    out = set()
    for result in results:
        if result.policy.unsupported_reason is not None:
            continue
        key = result.policy.key
        for verdict in result.evidence:
            ev = by_id[verdict.id]
            if ev.problems or ev.platform != key.platform:
                continue
            cause = _cause(_manifest_for(ev, key), ev, before, after)
            if cause is not None:
                out.add(Affected(key, ev.kind, ev.id, cause))
    return sorted(out)


def stale_cells(results: Sequence[CellResult], kind: str, platform: str) -> list[CellKey]:
    """Supported cells of ``platform`` with no counting evidence of ``kind``: what a collection collects."""
    return sorted(
        r.policy.key
        for r in results
        if r.policy.unsupported_reason is None
        and r.policy.key.platform == platform
        and (kind != "probe" or r.policy.probe_required)
        and not any(v.kind == kind and v.counts for v in r.evidence)
    )
