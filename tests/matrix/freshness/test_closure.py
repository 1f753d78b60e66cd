"""The static import closure over a project's own files."""

from __future__ import annotations

from soakbench.matrix.freshness.closure import import_closure, module_path

FILES = {
    "app/__init__.py": b"",
    "app/main.py": (
        b"from typing import TYPE_CHECKING\nimport numpy\nfrom app import util\nfrom . import shared\n"
        b"if TYPE_CHECKING:\n    from app import typing_only\n"
        b"def run():\n    from app.lazy import thing\n    import importlib\n"
        b"    importlib.import_module('app.by_name')\n"
    ),
    "app/util.py": b"from .deep.leaf import X\n",
    "app/shared.py": b"",
    "app/typing_only.py": b"",
    "app/lazy.py": b"import torch\n",
    "app/by_name.py": b"",
    "app/deep/leaf.py": b"X = 1\n",  # a namespace package: no __init__.py
    "app/broken.py": b"def (:\n",
}


def read(path: str) -> bytes | None:
    return FILES.get(path)


def test_module_level_imports_are_a_lower_bound() -> None:
    closure = import_closure(["app/main.py"], read, lazy=False)
    assert closure.files == {
        "app/__init__.py",
        "app/main.py",
        "app/util.py",
        "app/shared.py",
        "app/deep/leaf.py",
    }
    assert "numpy" in closure.external and "torch" not in closure.external


def test_lazy_imports_are_followed_when_asked_and_type_checking_never() -> None:
    closure = import_closure(["app/main.py"], read, lazy=True)
    assert "app/lazy.py" in closure.files and "torch" in closure.external
    assert "app/typing_only.py" not in closure.files
    assert "app/by_name.py" not in closure.files  # loaded by name: a cell names it as an entry file


def test_entries_that_do_not_parse_or_exist_add_nothing() -> None:
    assert import_closure(["app/broken.py", "app/missing.py"], read, lazy=True).files == {"app/broken.py"}
    assert module_path("app.deep.leaf", read) == "app/deep/leaf.py"
    assert module_path("app", read) == "app/__init__.py"
    assert module_path("nowhere", read) is None


def test_the_soakbench_namespace_maps_to_the_rooms_at_the_root() -> None:
    files = {
        "soakbench/__init__.py": b"",
        "harness/__init__.py": b"",
        "harness/cli.py": b"from soakbench.harness.verdicts import judge\nimport soakbench.foundation.atomic\n",
        "harness/verdicts.py": b"from .shared import x\n",
        "harness/shared.py": b"",
        "foundation/__init__.py": b"",
        "foundation/atomic.py": b"",
    }
    closure = import_closure(["harness/cli.py"], files.get, lazy=False)
    assert closure.files == set(files)  # the namespace's own __init__ loads with every import through it
    assert closure.external == frozenset()
    assert module_path("soakbench", files.get) == "soakbench/__init__.py"


def test_a_project_without_the_namespace_keeps_soakbench_imports_external() -> None:
    # an outside project that uses soakbench and has a harness/ of its own: soakbench.harness is not it
    files = {"harness/__init__.py": b"", "harness/x.py": b"", "t.py": b"from soakbench.harness import x\n"}
    closure = import_closure(["t.py"], files.get, lazy=False)
    assert closure.files == {"t.py"}
    assert closure.external == {"soakbench"}
