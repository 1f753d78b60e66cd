"""Ingest's side of input manifests: the per-cell inputs of a JUnit summary, derived from the commit its
tests ran at (the guard on every filed manifest is grading's, ``matrix.grading.manifest_guard``)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from soakbench.foundation.inputs import canonical_name
from soakbench.matrix.declared import SourcesOf
from soakbench.matrix.freshness import commit_reader, junit_manifest, tree_blobs
from soakbench.matrix.freshness.junit_inputs import Resolution
from soakbench.matrix.model import CellKey


def distribution_names() -> dict[str, tuple[str, ...]]:
    """Top-level module name -> the (lock-style) names of every installed distribution that provides it
    (``import mujoco`` is three: MuJoCo itself and the distributions that add files to its package)."""
    return {
        top: tuple(sorted({canonical_name(d) for d in dists}))
        for top, dists in metadata.packages_distributions().items()
        if dists
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
    source = summary["source"]
    resolution = Resolution(
        lock.decode() if lock else None,
        distribution_names(),
        source.get("python"),
        source.get("distributions"),
    )
    for cell in summary["cells"]:
        key = CellKey(cell["algo"], cell["task"], cell["backend"], summary["platform"], cell.get("ranks", 1))
        try:
            sources = sources_of(key)
        except KeyError:
            continue
        files = [f for f in (test_file(t, tree) for t in cell["tests"]) if f is not None]
        if files:
            cell["inputs"] = junit_manifest(files, tree, read, (sources.entries, sources.data), resolution)
