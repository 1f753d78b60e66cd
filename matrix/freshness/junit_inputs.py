"""The inputs of one cell's Tested evidence at a commit (pure: the commit's tree and a reader come in).

A cell's bound tests depend on their own files, every ``conftest.py`` above them, the pytest
configuration, what those files import (functions' imports included: an upper estimate), the cell's own
sources (``matrix.declared.runtime_facts.CellSources``: its subprocess runs load them), and the locked
distributions the imports reach with everything they depend on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from soakbench.matrix.freshness.closure import Reader, import_closure
from soakbench.matrix.freshness.lock import dependency_closure

PYTEST_CONFIG_FILES: tuple[str, ...] = ("pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg")
ROLE = "bound tests (static)"


def conftests_above(test_file: str, tree: Mapping[str, str]) -> list[str]:
    """``conftest.py`` of the test file's folder and of every folder above it, as committed."""
    out = []
    for parent in PurePosixPath(test_file).parents:
        candidate = "conftest.py" if str(parent) == "." else f"{parent}/conftest.py"
        if candidate in tree:
            out.append(candidate)
    return out


def junit_manifest(
    test_files: Iterable[str],
    tree: Mapping[str, str],
    read: Reader,
    sources: tuple[tuple[str, ...], tuple[str, ...]],
    lock_text: str | None,
    distribution_of: Mapping[str, str],
) -> dict[str, Any]:
    """The input manifest (``foundation/inputs.py`` shape) of a cell's bound tests.

    Args:
        test_files: project paths of the bound test files.
        tree: ``{path: blob id}`` of the commit the tests ran at.
        read: reads a file of that commit.
        sources: the cell's (entry files, data path prefixes).
        lock_text: that commit's ``uv.lock`` (None: no lock, distributions left out).
        distribution_of: top-level module name -> distribution name, as installed where ingest runs.
    """
    entries, data = sources
    tests = sorted(set(test_files))
    fixed = {c for t in tests for c in conftests_above(t, tree)} | {
        c for c in PYTEST_CONFIG_FILES if c in tree
    }
    closure = import_closure([*tests, *sorted(fixed), *entries], read, lazy=True)
    files = set(closure.files) | fixed | {p for p in tree if p.startswith(tuple(data))}
    roots = sorted({distribution_of[top] for top in closure.external if top in distribution_of})
    dists = dependency_closure(lock_text, roots) if lock_text is not None else {}
    return {
        "manifest_version": 1,
        "files": {path: tree[path] for path in sorted(files) if path in tree},
        "distributions": dists,
        "processes": [{"role": ROLE, "pid": 0, "files": len(files)}],
    }
