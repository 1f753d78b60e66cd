"""Two-way audit of test bindings, read statically from the source of ``tests/`` (no pytest run).

Every ``cell(...)`` marker (``@pytest.mark.cell(algo, task, backend, kind=KIND)``, ``marks=`` of a
``pytest.param`` or a module's ``pytestmark``) must name a cell the inventory declares, with string
literals so that it can be read without importing the tests; ``ranks=N`` (an integer literal >= 2) binds
the test to the cells of a job of N ranks instead of the single-rank ones. Every cell that is not
Unsupported must have bound tests of its rank count, one at least of each kind its policy lists.
``matrix check`` fails on any finding.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from soakbench.matrix.model import TEST_KINDS, Binding, CellKey, Inventory, marker_text

TESTS_REL = "tests"
_AXES = ("algo", "task", "backend")
_KEYWORDS = {*_AXES, "kind", "ranks"}
Cell = tuple[str, str, str]  # algo, task, backend


@dataclass(frozen=True)
class CellMarker:
    """One ``cell(...)`` marker in the test sources. ``problem`` set means it could not be read."""

    file: str  # repo-relative POSIX path
    line: int
    test: str  # the decorated function, or "<module>" for a marker outside any function
    cell: Cell | None = None
    kind: str | None = None
    problem: str | None = None
    ranks: int = 1

    def binding(self) -> Binding | None:
        """``(algo, task, backend, ranks)`` this marker binds to, None when it could not be read."""
        return None if self.cell is None else (*self.cell, self.ranks)

    def describe(self) -> str:
        """``kind at file:line (test)``."""
        return f"{self.kind or 'no kind'} at {self.where()}"

    def where(self) -> str:
        """``file:line`` (and the test), for messages."""
        return f"{self.file}:{self.line}" + ("" if self.test == "<module>" else f" ({self.test})")


def _is_cell_mark(node: ast.expr) -> bool:
    """``<anything>.mark.cell`` or ``mark.cell``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "cell"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
        isinstance(owner, ast.Name) and owner.id == "mark"
    )


def _literal(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value
        and "/" not in node.value
    ):
        return node.value
    return None


def _ranks(node: ast.expr | None) -> int | None:
    """The ``ranks=`` value: 1 when absent, N for an integer literal >= 2, else None (unreadable)."""
    if node is None:
        return 1
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2:
        return node.value
    return None


def _read_call(call: ast.Call, file: str, test: str) -> CellMarker:
    """The cell, kind and ranks of one marker call; a problem when they are not plain literals."""
    named = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
    unknown = sorted(set(named) - _KEYWORDS)
    values = [*call.args, *(named[a] for a in _AXES if a in named)]
    literals = [_literal(v) for v in values]
    kind_node = named.get("kind")
    kind = _literal(kind_node) if kind_node is not None else None
    ranks = _ranks(named.get("ranks"))
    base = CellMarker(file, call.lineno, test)
    if unknown or len(call.keywords) != len(named):
        return _with(
            base,
            "cell marker takes algo, task, backend, kind and ranks only, got "
            f"{', '.join(unknown) or '**kwargs'}",
        )
    if len(values) != 3 or any(v is None for v in literals):
        return _with(base, "cell marker needs (algo, task, backend) as three non-empty string literals")
    if kind_node is not None and kind not in TEST_KINDS:
        return _with(base, f"cell marker kind must be a string literal, one of {', '.join(TEST_KINDS)}")
    if ranks is None:
        return _with(base, "cell marker ranks must be an integer literal >= 2 (leave it out for one rank)")
    algo, task, backend = (str(v) for v in literals)
    return CellMarker(file, call.lineno, test, (algo, task, backend), kind, ranks=ranks)


def _with(marker: CellMarker, problem: str) -> CellMarker:
    return CellMarker(marker.file, marker.line, marker.test, problem=problem)


def _walk(node: ast.AST, test: str) -> Iterator[tuple[ast.expr, str]]:
    """Every expression under ``node`` with the function it belongs to (decorators included)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            yield child, test
        yield from _walk(
            child, child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else test
        )


def markers_in_source(source: str, file: str) -> list[CellMarker]:
    """The cell markers of one test module (pure). A file that does not parse is one problem marker."""
    try:
        tree = ast.parse(source, filename=file)
    except SyntaxError as exc:
        return [CellMarker(file, exc.lineno or 0, "<module>", problem=f"does not parse: {exc.msg}")]
    exprs = list(_walk(tree, "<module>"))
    called = {id(node.func) for node, _ in exprs if isinstance(node, ast.Call)}
    found = [
        _read_call(node, file, test)
        for node, test in exprs
        if isinstance(node, ast.Call) and _is_cell_mark(node.func)
    ]
    found += [
        CellMarker(file, node.lineno, test, problem="cell marker used without arguments")
        for node, test in exprs
        if _is_cell_mark(node) and id(node) not in called
    ]
    return sorted(found, key=lambda m: (m.line, m.test))


def collect_markers(repo: Path) -> tuple[CellMarker, ...]:
    """Every cell marker in ``repo/tests/**/*.py`` (unreadable files are problem markers)."""
    out: list[CellMarker] = []
    for path in sorted((repo / TESTS_REL).rglob("*.py")):
        rel = path.relative_to(repo).as_posix()
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            out.append(CellMarker(rel, 0, "<module>", problem=f"cannot be read: {exc}"))
            continue
        out.extend(markers_in_source(source, rel))
    return tuple(out)


def bound_to(markers: Sequence[CellMarker], key: CellKey) -> list[CellMarker]:
    """The readable markers that bind a test to ``key``'s algo/task/backend and rank count."""
    return [m for m in markers if m.binding() == key.binding()]


def audit(inventory: Inventory, markers: Sequence[CellMarker]) -> list[str]:
    """Findings of the two-way audit (pure; empty when the bindings and the inventory agree)."""
    declared = {c.key.binding() for c in inventory.cells}
    findings = [f"{m.where()}: {m.problem}" for m in markers if m.problem is not None]
    for m in markers:
        binding = m.binding()
        if binding is not None and binding not in declared:
            findings.append(f"{m.where()}: {marker_text(binding)} names no cell of matrix/inventory.yaml")
    for policy in inventory.cells:
        if policy.unsupported_reason is not None:
            continue
        bound = bound_to(markers, policy.key)
        label = policy.key.label()
        if not bound:
            findings.append(f"{label}: no test in {TESTS_REL}/ is marked {policy.key.marker()}")
            continue
        have = {m.kind for m in bound}
        missing = [k for k in policy.test_kinds if k not in have]
        if missing:
            findings.append(
                f"{label}: no bound test of kind {', '.join(missing)} "
                f"(bound: {'; '.join(m.describe() for m in bound)})"
            )
    return findings
