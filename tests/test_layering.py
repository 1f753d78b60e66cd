"""The package layering: foundation under everything, the runtime never depends on its test harness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "foundation": ("runtime", "harness", "matrix"),
    "runtime": ("harness", "matrix"),
}


def room_module(name: str) -> str:
    """A module's name inside the repository (``soakbench.harness.soak`` is ``harness.soak``): the rooms
    are imported through the ``soakbench`` package and live at the repository root."""
    return name.removeprefix("soakbench.")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module a file imports, by its name inside the repository, with its line (lazy
    imports inside functions included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, room_module(alias.name)) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, room_module(node.module)))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_imports(package: str) -> None:
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN[package]
    ]
    assert violations == []


def test_the_layering_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from soakbench.harness.soak import cli\n    import matrix.cli\n")
    assert [m for _, m in imported_modules(bad)] == ["harness.soak", "matrix.cli"]


def test_foundation_imports_no_heavy_modules() -> None:
    code = (
        "import sys, soakbench.foundation, soakbench.foundation.atomic, soakbench.foundation.schema, "
        "soakbench.foundation.vocab, soakbench.foundation.nvml, soakbench.foundation.mps, "
        "soakbench.foundation.gpu_health; "
        "print(sorted(m for m in ('torch', 'jsonschema', 'numpy', 'mujoco') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


PROJECT = ("foundation", "runtime", "harness", "matrix")
#: Imports that read or write the host; a package whose docstring says "no I/O" imports none of them.
IO_MODULES = (
    "subprocess", "shutil", "socket", "tempfile", "glob", "ctypes", "threading", "multiprocessing",
    "concurrent", "psutil", "pynvml", "foundation.atomic", "foundation.nvml", "foundation.mps",
    "foundation.gpu_health",
)  # fmt: skip


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the same set it imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(room_module(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                module = room_module(node.module)
                targets.add(module)
                targets.update(f"{module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as the modules along it (first repeated at the end), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


#: The packages built of rooms, each room's ``__init__`` docstring ending in ``May import: a, b.``
ROOMED = ("harness", "matrix", "runtime")


@pytest.mark.parametrize("package", ROOMED)
def test_no_import_cycle(package: str) -> None:
    """Lazy and type-checking imports count: a cycle among them still ties the modules together."""
    cycle = find_cycle(import_graph(module_files(REPO, package)))
    assert cycle == [], " -> ".join(cycle)


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "harness" / "soak"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from harness.soak.b import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.soak import c\n"
    )
    (pkg / "c.py").write_text("def f():\n    from harness.soak.a import y\n")
    graph = import_graph(module_files(tmp_path, "harness"))
    assert find_cycle(graph) == ["harness.soak.a", "harness.soak.b", "harness.soak.c", "harness.soak.a"]
    (pkg / "c.py").write_text("")
    assert find_cycle(import_graph(module_files(tmp_path, "harness"))) == []


def package_docs(root: Path, package: str) -> dict[str, str]:
    """Every package under ``package`` (itself included) by dotted name -> its docstring ('' if none)."""
    return {
        ".".join(init.relative_to(root).parent.parts): ast.get_docstring(
            ast.parse(init.read_text(encoding="utf-8"))
        )
        or ""
        for init in sorted((root / package).rglob("__init__.py"))
    }


def declared_groups(root: Path, package: str) -> dict[str, tuple[str, ...]]:
    """Each package under ``package`` whose docstring says ``May import: a, b.`` -> those prefixes."""
    return {
        name: tuple(a.strip() for a in doc.split("May import:", 1)[1].strip().rstrip(".").split(","))
        for name, doc in package_docs(root, package).items()
        if "May import:" in doc
    }


def owning_group(module: str, groups: dict[str, tuple[str, ...]]) -> str:
    """The innermost declared package that holds ``module``."""
    return max((g for g in groups if module == g or module.startswith(g + ".")), key=len)


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def group_violations(root: Path, package: str) -> list[str]:
    groups = declared_groups(root, package)
    violations = []
    for name, path in module_files(root, package).items():
        group = owning_group(name, groups)
        for line, module in imported_modules(path):
            if module.split(".")[0] in PROJECT and not within(module, groups[group]):
                violations.append(f"{path.relative_to(root)}:{line} imports {module} ({group} may not)")
    return violations


@pytest.mark.parametrize("package", ROOMED)
def test_every_package_declares_what_it_may_import(package: str) -> None:
    docs = package_docs(REPO, package)
    assert [name for name, doc in docs.items() if "May import:" not in doc] == []


def test_the_soak_rooms_say_what_they_may_import_in_one_line() -> None:
    """The ``May import:`` clause is the docstring's last paragraph, on one line, whatever comes before."""
    docs = package_docs(REPO, "harness")
    groups = ("verdicts", "host", "loop", "evidence")
    clauses = [docs[f"harness.soak.{g}"].rpartition("May import:")[2] for g in groups]
    assert all(clause and "\n" not in clause for clause in clauses)


@pytest.mark.parametrize("package", ROOMED)
def test_role_groups_import_only_what_their_docstring_allows(package: str) -> None:
    assert group_violations(REPO, package) == []


def test_pure_groups_import_nothing_that_does_io() -> None:
    groups = declared_groups(REPO, "harness")
    pure = {name for name, doc in package_docs(REPO, "harness").items() if "no I/O" in doc}
    assert {"harness.soak.verdicts", "harness.two_runs"} <= pure
    violations = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for name, path in module_files(REPO, "harness").items()
        if owning_group(name, groups) in pure
        for line, module in imported_modules(path)
        if within(module, IO_MODULES)
    ]
    assert violations == []


def test_the_group_check_sees_a_violation(tmp_path: Path) -> None:
    pkg = tmp_path / "harness" / "soak" / "verdicts"
    pkg.mkdir(parents=True)
    (tmp_path / "harness" / "__init__.py").write_text('"""Top. May import: foundation, harness."""\n')
    (tmp_path / "harness" / "soak" / "__init__.py").write_text('"""Soak. May import: harness.soak."""\n')
    (pkg / "__init__.py").write_text('"""Pure. May import: foundation, harness.soak.verdicts."""\n')
    (pkg / "trend.py").write_text("from harness.soak.verdicts import x\nfrom foundation import vocab\n")
    (pkg / "bad.py").write_text("def f():\n    from harness.soak.host.procs import read\n")
    assert group_violations(tmp_path, "harness") == [
        "harness/soak/verdicts/bad.py:2 imports harness.soak.host.procs (harness.soak.verdicts may not)"
    ]
