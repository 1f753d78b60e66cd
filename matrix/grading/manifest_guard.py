"""The guard on filed input manifests, run by ``matrix ingest`` and again by ``generate`` and ``check``.

A manifest says what a piece of evidence depends on, and freshness trusts it: a file it leaves out can
change without staling the evidence. Two things about a manifest can be recomputed from the commit the
evidence names, so they are, every time the evidence is read:

- the project files its cell's own code loads at module level (the static import closure of the cell's
  entry files) must all be recorded;
- every recorded file must be recorded at the blob that commit holds (a clean run loads exactly those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from soakbench.harness.two_runs.fields import dig
from soakbench.matrix.declared import SourcesOf
from soakbench.matrix.freshness import commit_reader, import_closure, resolve_commit, tree_blobs
from soakbench.matrix.grading.evidence import names_cell
from soakbench.matrix.model import CellKey, EvidenceFacts, InputManifest, cell_property

PROBE_WORKER = "harness/probe/worker.py"
#: How many file names a problem lists before it says how many more.
_LISTED = 5


def guard_entries(kind: str, doc: Mapping[str, Any], keys: list[CellKey], sources_of: SourcesOf) -> list[str]:
    """The entry files an artifact's manifest must cover: a soak run's cell sources; a probe's worker
    and the modules of its task and backends (a monitored command that names no cell names none)."""
    out: set[str] = set()
    for key in keys:
        try:
            sources = sources_of(key)
        except KeyError:
            continue
        if kind == "soak" and names_cell(doc):
            out.update(sources.entries)
        elif kind == "probe":
            out.update(sources.physics)  # a probe steps the physics alone: no trainer, no learner
    if kind == "probe" and out:
        out.add(PROBE_WORKER)
    return sorted(out)


def missing_from_manifest(
    repo: Path, commit: str, manifest_files: Iterable[str], entries: Iterable[str]
) -> list[str]:
    """Project files the ``entries`` load at module level, at ``commit``, that the manifest omits: a
    manifest that omits one understates what the evidence depends on."""
    closure = import_closure(list(entries), commit_reader(repo, commit), lazy=False)
    return sorted(closure.files - set(manifest_files))


def foreign_blobs(manifest_files: Mapping[str, str], tree: Mapping[str, str]) -> list[str]:
    """Recorded project files whose blob is not the one ``tree`` (the evidence's commit) holds (pure)."""
    return sorted(path for path, blob in manifest_files.items() if path in tree and blob != tree[path])


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - _LISTED} more" if len(paths) > _LISTED else ""
    return ", ".join(paths[:_LISTED]) + more


def _manifests(
    kind: str, doc: Mapping[str, Any], facts: EvidenceFacts, sources_of: SourcesOf
) -> list[tuple[str, InputManifest, list[str]]]:
    """(the field that holds it, the manifest, the entry files it must cover) of each filed manifest."""
    out: list[tuple[str, InputManifest, list[str]]] = []
    if facts.inputs is not None and kind != "junit":
        algo = dig(doc, "settings.algo") if kind == "probe" else None
        keys = [CellKey(a or str(algo), t, b, facts.platform, facts.ranks or 1) for a, t, b in facts.covers]
        out.append(("inputs.files", facts.inputs, guard_entries(kind, doc, keys, sources_of)))
    for binding, manifest in sorted(facts.cell_inputs.items()):
        try:
            entries = list(sources_of(CellKey(*binding[:3], facts.platform, binding[3])).entries)
        except KeyError:
            entries = []
        out.append((f"cells[{cell_property(*binding)}].inputs.files", manifest, entries))
    return out


def manifest_problems(
    repo: Path, kind: str, doc: Mapping[str, Any], facts: EvidenceFacts, sources_of: SourcesOf
) -> list[str]:
    """``field: why`` for each filed manifest of ``facts`` that understates or misstates its inputs at
    the evidence's commit; empty when they hold (or the commit is not in HEAD's history, said elsewhere)."""
    full = resolve_commit(repo, facts.commit) if facts.commit else None
    if full is None:
        return []
    tree = tree_blobs(repo, full)
    problems = []
    for where, manifest, entries in _manifests(kind, doc, facts, sources_of):
        if missing := (missing_from_manifest(repo, full, manifest.files, entries) if entries else []):
            problems.append(
                f"{where}: the input manifest omits {len(missing)} module(s) its cell's code loads: "
                f"{_listed(missing)}; the evidence would look fresh after a change to them"
            )
        if foreign := foreign_blobs(manifest.files, tree):
            problems.append(
                f"{where}: the input manifest records {len(foreign)} file(s) at a blob that commit "
                f"{full[:12]} does not hold: {_listed(foreign)}"
            )
    return problems
