"""docs/architecture.md's tables follow the tree: every module they name exists, and every module and
package of the project is named in one of them.

A row names modules in two ways: dotted names in its first cell (``harness.probe``, or
``foundation.atomic.write_atomic(path, data, mode)``, a module and an attribute of it), and, where the table
has a ``modules`` column, the bare names there, each a module or sub-package of the row's package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
PROJECT = ("foundation", "runtime", "harness", "matrix")
TICKED = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"^((?:foundation|runtime|harness|matrix)(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def tree_modules(root: Path) -> set[str]:
    """Every module and package of the project by dotted name (``__main__`` and filed data aside)."""
    found = set()
    for package in PROJECT:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def table_rows(text: str) -> list[tuple[list[str], list[str]]]:
    """Each table row's cells with the header of its table (separator rows dropped)."""
    rows, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
        elif not set("".join(cells)) <= set("-: "):
            rows.append((header, cells))
    return rows


def named(text: str) -> list[str]:
    """Every dotted name (a module, or a module's attribute) the tables of ``text`` name."""
    out = []
    for header, cells in table_rows(text):
        heads = [m.group(1) for m in map(DOTTED.match, TICKED.findall(cells[0])) if m]
        out += heads
        if "modules" in header and heads:
            out += [f"{heads[0]}.{name}" for name in TICKED.findall(cells[header.index("modules")])]
    return out


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def missing_names(root: Path, names: list[str], modules: set[str]) -> list[str]:
    """The names that are neither a module of the tree nor a top-level name of one."""
    out = []
    for name in names:
        if name in modules:
            continue
        owner, _, attribute = name.rpartition(".")
        source = root / (owner.replace(".", "/") + ".py")
        package = root / owner.replace(".", "/") / "__init__.py"
        path = source if source.exists() else package
        if owner not in modules or attribute not in _top_level_names(path):
            out.append(name)
    return out


def test_every_module_the_tables_name_exists() -> None:
    assert missing_names(REPO, named(DOC.read_text(encoding="utf-8")), tree_modules(REPO)) == []


def covered(names: list[str], modules: set[str]) -> set[str]:
    """The modules ``names`` name: each module, and the module of each attribute named."""
    return {name if name in modules else name.rpartition(".")[0] for name in names}


def test_every_module_of_the_tree_is_in_a_table() -> None:
    modules = tree_modules(REPO)
    assert sorted(modules - covered(named(DOC.read_text(encoding="utf-8")), modules)) == []


def test_the_check_sees_a_stale_and_a_missing_module(tmp_path: Path) -> None:
    (tmp_path / "harness" / "probe").mkdir(parents=True)
    for rel in ("harness/__init__.py", "harness/probe/__init__.py", "harness/probe/cli.py"):
        (tmp_path / rel).write_text("def main():\n    pass\n")
    (tmp_path / "harness" / "probe" / "worker.py").write_text("")
    doc = "| package | modules | what |\n|---|---|---|\n| `harness.probe` | `cli`, `gone` | the probe |\n"
    doc += "\n| module | what |\n|---|---|\n| `harness.probe.cli.main` | entry |\n| `harness.nope` | x |\n"
    modules = tree_modules(tmp_path)
    assert missing_names(tmp_path, named(doc), modules) == ["harness.probe.gone", "harness.nope"]
    assert sorted(modules - covered(named(doc), modules)) == ["harness.probe.worker"]
