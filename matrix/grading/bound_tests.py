"""The tests bound to each cell, read from test sources (pure), and what a JUnit summary lacks of them.

A JUnit summary counts for a cell only when it holds every test bound to that cell at the summary's
commit: a lane that deselected one (``-k``, a narrower path) must not grade the cell on the rest. The bound
tests come from the same static reading of ``cell(...)`` markers as ``matrix check`` (no pytest run), so
they can be read from any commit's sources:

- a marker on a test function binds that function (every parametrization of it);
- a marker on a class, or in a module's ``pytestmark``, binds every test function under it;
- a marker in ``marks=`` of a ``pytest.param`` binds the parametrization of each test that takes that param
  (through ``@pytest.mark.parametrize(..., NAME)`` with ``NAME`` a module-level list, or a list written in
  the decorator). Its id is the ``id=`` literal, or the one pytest derives from literal values (joined by
  ``-``); a param whose id cannot be derived binds the function as a whole.

A marker this reading cannot attach to a test (a param in a list no test is parametrized with) still
binds its file: some test of that file must be bound to the cell.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from soakbench.matrix.grading.audit import CellMarker, markers_in_source
from soakbench.matrix.model import Binding

#: The xdist ``--dist loadgroup`` suffix that a test id carries in JUnit (``name@group``).
_GROUP_SEPARATOR = "@"


@dataclass(frozen=True)
class BoundTest:
    """One test (or parametrization) a cell marker binds. ``function`` None: any test of ``file`` bound to
    the cell; ``param_id`` None: any parametrization of ``function``."""

    binding: Binding
    file: str  # repo-relative POSIX path of the test module
    function: str | None
    param_id: str | None
    kind: str | None

    def module(self) -> str:
        """The dotted module JUnit names in a test's classname (``tests/a/test_b.py`` -> ``tests.a.test_b``)."""
        return self.file.removesuffix(".py").replace("/", ".")

    def label(self) -> str:
        """How a message names it: ``module::function[id]`` (``module::*`` for any test of the file)."""
        name = self.function or "*"
        return f"{self.module()}::{name}" + (f"[{self.param_id}]" if self.param_id is not None else "")

    def matches(self, test_id: str) -> bool:
        """True when JUnit ``test_id`` (``classname::name``, maybe ``@group``-suffixed) is this test."""
        classname, _, name = test_id.partition("::")
        if classname != self.module() and not classname.startswith(self.module() + "."):
            return False
        if self.function is None:
            return True
        base, bracket, params = _without_group(name).partition("[")
        if base != self.function:
            return False
        if self.param_id is None:
            return True
        return bool(bracket) and self.param_id in _id_runs(params.removesuffix("]"))


def _without_group(name: str) -> str:
    head, separator, tail = name.rpartition(_GROUP_SEPARATOR)
    return head if separator and "]" not in tail else name


def _id_runs(params: str) -> set[str]:
    """Every run of consecutive ``-``-joined parts of a parametrization id: a stacked parametrize joins
    each decorator's id with ``-``, so one param's id is some run of them."""
    parts = params.split("-")
    return {"-".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}


def bound_tests(sources: Mapping[str, str]) -> dict[Binding, tuple[BoundTest, ...]]:
    """Per cell binding, the tests its markers bind in ``sources`` (test file path -> source text)."""
    out: dict[Binding, list[BoundTest]] = {}
    for file, source in sorted(sources.items()):
        for test in _file_tests(file, source):
            out.setdefault(test.binding, []).append(test)
    return {binding: tuple(tests) for binding, tests in out.items()}


def missing_tests(expected: Iterable[BoundTest], test_ids: Iterable[str]) -> list[BoundTest]:
    """The expected tests no id in ``test_ids`` matches."""
    ids = list(test_ids)
    return [test for test in expected if not any(test.matches(i) for i in ids)]


@dataclass(frozen=True)
class Completeness:
    """A JUnit summary held against the tests bound at its commit: per cell it records, the labels of the
    bound tests it lacks, and the kinds of the tests bound there."""

    missing: Mapping[Binding, tuple[str, ...]]
    kinds: Mapping[Binding, frozenset[str]]


def completeness(
    expected: Mapping[Binding, tuple[BoundTest, ...]], recorded: Mapping[Binding, tuple[str, ...]]
) -> Completeness:
    """What each cell of a summary (``recorded``: cell -> its test ids) lacks of ``expected`` (pure)."""
    missing = {
        binding: labels
        for binding, ids in recorded.items()
        if (labels := tuple(t.label() for t in missing_tests(expected.get(binding, ()), ids)))
    }
    kinds = {b: frozenset(t.kind for t in expected.get(b, ()) if t.kind) for b in recorded}
    return Completeness(missing, kinds)


def describe_missing(labels: Iterable[str], commit: str) -> str:
    """``incomplete: N test(s) bound at COMMIT missing from the lane: a, b`` for messages."""
    names = list(labels)
    return (
        f"incomplete: {len(names)} test(s) bound at {commit[:12]} missing from the lane: {', '.join(names)}"
    )


def _file_tests(file: str, source: str) -> list[BoundTest]:
    if "mark.cell" not in source:  # no marker can be written without it: most test files are never parsed
        return []
    try:
        tree = ast.parse(source, filename=file)
    except SyntaxError:
        return []  # matrix check reports a file that does not parse
    # keyed as markers_in_source names them: (line, the function whose decorator holds it, or <module>)
    markers = {(m.line, m.test): m for m in markers_in_source(source, file) if m.binding() is not None}
    claimed: set[tuple[int, str]] = set()
    out: list[BoundTest] = []
    lists = _module_lists(tree)
    for function, scope_marks, own_marks in _test_functions(tree):
        found: list[tuple[tuple[int, str], str | None]] = [
            ((c.lineno, "<module>"), None) for c in scope_marks
        ]
        found += [((c.lineno, function.name), None) for c in own_marks]
        for param, param_id in _params_of(function, lists):
            found += [
                ((c.lineno, owner), param_id)
                for c in _cell_calls(_keyword(param, "marks"))
                for owner in (function.name, "<module>")
            ]
        for key, param_id in found:
            if key in markers:
                claimed.add(key)
                out.append(_test(markers[key], file, function.name, param_id))
    out += [_test(m, file, None, None) for key, m in markers.items() if key not in claimed]
    return out


def _test(marker: CellMarker, file: str, function: str | None, param_id: str | None) -> BoundTest:
    binding = marker.binding()
    if binding is None:  # only readable markers are kept; this would be a programming error
        raise ValueError(f"{marker.where()}: an unreadable marker binds no test")
    return BoundTest(binding, file, function, param_id, marker.kind)


def _module_lists(tree: ast.Module) -> dict[str, ast.List | ast.Tuple]:
    """Module-level ``NAME = [...]`` (or a tuple) by name: parametrize argument lists."""
    found: dict[str, ast.List | ast.Tuple] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple):
            found.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _cell_calls(node: ast.AST | None) -> list[ast.expr]:
    """The ``cell(...)`` mark expressions inside ``node``."""
    if node is None:
        return []
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "cell"
    ]


def _test_functions(
    tree: ast.Module,
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.expr], list[ast.expr]]]:
    """Each test function with the cell marks of its scopes (module ``pytestmark``, class decorators and
    class ``pytestmark``) and of its own decorators."""
    module_marks = _pytestmark(tree.body)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            yield node, module_marks, _decorator_marks(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            scope = module_marks + [c for d in node.decorator_list for c in _cell_calls(d)]
            scope += _pytestmark(node.body)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    yield item, scope, _decorator_marks(item)


def _pytestmark(body: list[ast.stmt]) -> list[ast.expr]:
    return [
        call
        for node in body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        for call in _cell_calls(node.value)
    ]


def _decorator_marks(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    """Cell marks applied to the function itself (not those inside a parametrize decorator's params)."""
    return [d for d in function.decorator_list if any(c is d for c in _cell_calls(d))]


def _is_parametrize(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parametrize"
    )


def _params_of(
    function: ast.FunctionDef | ast.AsyncFunctionDef, lists: Mapping[str, ast.List | ast.Tuple]
) -> Iterator[tuple[ast.Call, str | None]]:
    """Each ``pytest.param(...)`` a parametrize decorator of ``function`` feeds it, with its id."""
    for decorator in function.decorator_list:
        if not _is_parametrize(decorator):
            continue
        assert isinstance(decorator, ast.Call)
        values = decorator.args[1] if len(decorator.args) > 1 else _keyword(decorator, "argvalues")
        if isinstance(values, ast.Name):
            values = lists.get(values.id)
        for element in values.elts if isinstance(values, ast.List | ast.Tuple) else []:
            if (
                isinstance(element, ast.Call)
                and isinstance(element.func, ast.Attribute)
                and element.func.attr == "param"
            ):
                yield element, _param_id(element)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _param_id(param: ast.Call) -> str | None:
    """The id pytest gives ``param``: its ``id=`` literal, else its literal values joined by ``-``."""
    given = _keyword(param, "id")
    if given is not None:
        return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None
    parts = []
    for value in param.args:
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str | int | float | bool)):
            return None
        parts.append(str(value.value))
    return "-".join(parts) if parts else None
