"""Ingest's side of input manifests: the per-cell inputs of a JUnit summary, derived from the commit its
tests ran at, and the guard that refuses an artifact manifest missing part of its cell's own code."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from foundation.inputs import canonical_name
from matrix.declared import SourcesOf
from matrix.freshness import commit_reader, import_closure, junit_manifest, tree_blobs
from matrix.grading import names_cell
from matrix.model import CellKey

PROBE_WORKER = "harness/probe/worker.py"


def distribution_names() -> dict[str, str]:
    """Top-level module name -> the (lock-style) name of the installed distribution that provides it."""
    return {
        top: canonical_name(dists[0]) for top, dists in metadata.packages_distributions().items() if dists
    }


def test_file(test_id: str, tree: Mapping[str, str]) -> str | None:
    """The committed file of a JUnit test id (``tests.runtime.test_x.TestY::test_z``), None if none."""
    parts = test_id.partition("::")[0].split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if candidate in tree:
            return candidate
    return None


def add_junit_inputs(repo: Path, summary: dict[str, Any], sources_of: SourcesOf) -> None:
    """Give each cell of ``summary`` the input manifest of its bound tests at the summary's commit (a cell
    whose sources the runtime cannot name keeps none: the runtime fingerprint judges it)."""
    commit = summary["source"]["commit"]
    tree = tree_blobs(repo, commit)
    read = commit_reader(repo, commit)
    lock = read("uv.lock")
    names = distribution_names()
    for cell in summary["cells"]:
        key = CellKey(cell["algo"], cell["task"], cell["backend"], summary["platform"], cell.get("ranks", 1))
        try:
            sources = sources_of(key)
        except KeyError:
            continue
        files = [f for f in (test_file(t, tree) for t in cell["tests"]) if f is not None]
        if files:
            cell["inputs"] = junit_manifest(
                files, tree, read, (sources.entries, sources.data), lock.decode() if lock else None, names
            )


def missing_from_manifest(
    repo: Path, commit: str, manifest_files: Iterable[str], entries: Iterable[str]
) -> list[str]:
    """Project files the ``entries`` load at module level, at ``commit``, that the manifest omits: a
    manifest that omits one understates what the evidence depends on."""
    closure = import_closure(list(entries), commit_reader(repo, commit), lazy=False)
    return sorted(closure.files - set(manifest_files))


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
