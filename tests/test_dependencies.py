"""Every dependency the project declares serves it: a locked direct dependency that nothing imports is
dropped, not carried (it costs every install and hides what the product really needs)."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("foundation", "runtime", "harness", "matrix", "scripts", "benchmarks")
#: Declared dependencies that serve without a Python import, each with where it serves (a string that
#: must occur in the named file, so the reason cannot outlive the use).
USED_WITHOUT_IMPORT: dict[str, tuple[str, str]] = {
    "py-spy": ("harness/soak/host/forensics.py", "py-spy"),  # its executable takes the stacks
}


def _name(requirement: str) -> str:
    """The distribution name of a PEP 508 requirement, normalized (``Foo_Bar[x]>=1`` -> ``foo-bar``)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def declared() -> list[str]:
    """The distributions the project's install and its extras declare (the project itself aside)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [_name(r) for r in project["dependencies"]]
    names += [_name(r) for extra in project["optional-dependencies"].values() for r in extra]
    return sorted({n for n in names if n != _name(project["name"])})


def imported_tops() -> set[str]:
    """Every top-level module name imported anywhere in the project's sources (lazy imports and
    ``importlib.import_module`` of a literal name included)."""
    tops: set[str] = set()
    for package in SOURCES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    tops.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops.add(node.module.split(".")[0])
                elif _dynamic_import(node):
                    tops.add(node.args[0].value.split(".")[0])  # type: ignore[attr-defined]
    return tops


def _dynamic_import(node: ast.AST) -> bool:
    """``importlib.import_module("name")`` with a literal name (how an optional module is loaded)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def import_names(dist: str) -> set[str]:
    """The top-level import names a distribution installs (from its RECORD, as the installer wrote it)."""
    try:
        files = distribution(dist).files or []
    except PackageNotFoundError:
        pytest.fail(f"{dist} is declared but not installed: run `uv sync --frozen --extra mjwarp`")
    names = set()
    for file in files:
        first = file.parts[0]
        if first.endswith((".dist-info", ".data")) or first == "..":
            continue
        names.add(first.removesuffix(".py"))
    return names


def unused(declared_names: list[str], imported: set[str]) -> list[str]:
    return [
        name
        for name in declared_names
        if name not in USED_WITHOUT_IMPORT and not import_names(name) & imported
    ]


def test_every_declared_dependency_is_imported() -> None:
    assert unused(declared(), imported_tops()) == []


def test_a_dependency_nothing_imports_is_named() -> None:
    assert unused(["jinja2", "numpy"], {"numpy"}) == ["jinja2"]


@pytest.mark.parametrize("dist", sorted(USED_WITHOUT_IMPORT))
def test_a_dependency_used_without_an_import_is_still_used(dist: str) -> None:
    path, needle = USED_WITHOUT_IMPORT[dist]
    assert dist in declared()
    assert needle in (REPO / path).read_text(encoding="utf-8")
