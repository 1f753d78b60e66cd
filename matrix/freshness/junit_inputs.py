"""The inputs of one cell's Tested evidence at a commit (pure: the commit's tree and a reader come in).

A cell's bound tests depend on their own files, every ``conftest.py`` above them, the pytest
configuration, what those files import (functions' imports included: an upper estimate), the modules they
name by string (``pytest_plugins``, ``-p`` in the pytest configuration, ``python -m MODULE`` run in a
subprocess, a registry entry), the cell plugin that wrote the JUnit XML, the cell's own sources
(``matrix.declared.runtime_facts.CellSources``: its subprocess runs load them), and the locked
distributions the imports reach (every distribution behind an imported name) with everything they
depend on.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from soakbench.matrix.freshness.closure import Reader, import_closure, module_path
from soakbench.matrix.freshness.lock import dependency_closure

PYTEST_CONFIG_FILES: tuple[str, ...] = ("pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg")
#: The plugin that binds tests to cells and writes the run facts into the JUnit XML (``-p
#: soakbench.matrix.pytest_cell``): it makes a bound xfail strict, so it is an input of every summary.
CELL_PLUGIN = "matrix/pytest_cell.py"
#: A module named in text: ``-p NAME``, ``-m NAME``, or a whole dotted string (``"pkg.mod"``, ``"pkg.mod:attr"``).
_NAMED = re.compile(r"(?:-[pm]\s*)?([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)(?::\w+)?")
ROLE = "bound tests (static)"
#: What this static reading records beyond files and distributions (``matrix.model.RECORDED_INPUTS``).
#: Native libraries are not among them: no process of the lane reports its mappings.
STATIC_KINDS = ("plugins named by string", "subprocess modules")


def conftests_above(test_file: str, tree: Mapping[str, str]) -> list[str]:
    """``conftest.py`` of the test file's folder and of every folder above it, as committed."""
    out = []
    for parent in PurePosixPath(test_file).parents:
        candidate = "conftest.py" if str(parent) == "." else f"{parent}/conftest.py"
        if candidate in tree:
            out.append(candidate)
    return out


def named_modules(paths: Iterable[str], read: Reader) -> list[str]:
    """Project files of the modules ``paths`` name by string (not by ``import``): a Python file's string
    constants that are a whole dotted module name (``pytest_plugins``, ``[sys.executable, "-m", NAME]``,
    ``"pkg.mod:attr"``), and the ``-p NAME`` / ``-m NAME`` of a configuration file's text."""
    found: set[str] = set()
    for path in paths:
        source = read(path) or b""
        if path.endswith(".py"):
            try:
                tree = ast.parse(source, filename=path)
            except SyntaxError:
                continue
            texts = [
                n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            candidates = [m.group(1) for t in texts if (m := _NAMED.fullmatch(t.strip()))]
        else:
            text = source.decode("utf-8", errors="replace")
            candidates = re.findall(r"-[pm]\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", text)
        found.update(f for name in candidates if (f := module_path(name, read)) is not None)
    return sorted(found)


@dataclass(frozen=True)
class Resolution:
    """What a lane's imports resolved to: the commit's ``uv.lock`` (None: no lock, distributions left
    out), every distribution behind each top-level module name as installed where ingest runs, and the
    interpreter the lane ran (its ``matrix.python``; the lock is read at the versions it resolves for that
    Python, every version when None), and the versions its processes loaded (``matrix.distributions``),
    which a distribution the lane loaded is recorded at."""

    lock_text: str | None
    distribution_of: Mapping[str, tuple[str, ...]]
    python: str | None = None
    loaded: Mapping[str, str] | None = None  # the versions the lane's processes loaded; None: not recorded


def junit_manifest(
    test_files: Iterable[str],
    tree: Mapping[str, str],
    read: Reader,
    sources: tuple[tuple[str, ...], tuple[str, ...]],
    resolution: Resolution,
) -> dict[str, Any]:
    """The input manifest (``foundation/inputs.py`` shape) of a cell's bound tests.

    Args:
        test_files: project paths of the bound test files.
        tree: ``{path: blob id}`` of the commit the tests ran at.
        read: reads a file of that commit.
        sources: the cell's (entry files, data path prefixes).
        resolution: the lock, the installed distributions and the interpreter the imports resolve with.
    """
    entries, data = sources
    tests = sorted(set(test_files))
    fixed = {c for t in tests for c in conftests_above(t, tree)} | {
        c for c in (*PYTEST_CONFIG_FILES, CELL_PLUGIN) if c in tree
    }
    named = named_modules([*tests, *sorted(fixed)], read)
    closure = import_closure([*tests, *sorted(fixed), *named, *entries], read, lazy=True)
    files = set(closure.files) | fixed | {p for p in tree if p.startswith(tuple(data))}
    roots = sorted({name for top in closure.external for name in resolution.distribution_of.get(top, ())})
    lock, python = resolution.lock_text, resolution.python
    dists = dependency_closure(lock, roots, python) if lock is not None else {}
    loaded = resolution.loaded
    dists = {name: (loaded or {}).get(name, version) for name, version in dists.items()}
    recorded = [
        "files",
        "distributions",
        *(["interpreter"] if python else []),
        *STATIC_KINDS,
        *(["loaded versions"] if loaded is not None else []),
    ]
    return {
        "manifest_version": 1,
        "files": {path: tree[path] for path in sorted(files) if path in tree},
        "distributions": dists,
        **({"interpreter": python} if python else {}),
        "recorded": recorded,
        "processes": [{"role": ROLE, "pid": 0, "files": len(files)}],
    }
