"""Every import of the project goes through the one ``soakbench`` package.

A checkout also has its rooms on ``sys.path`` by their bare names (``runtime``, ``matrix``); one import by
a bare name would load a second copy of the module under another name, and would break in the wheel,
which installs nothing but ``soakbench``. So no file imports a room by its bare name, no code names one as
a module to run or load (``-m``, ``-p``, registries, plugins), and a process that loads the commands and
every registered task, backend and learner holds no module of a bare room.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("foundation", "runtime", "harness", "matrix")
PYTHON_TREES = (*ROOMS, "soakbench", "scripts", "benchmarks", "tests")
#: A string that names a module of a room by its bare name, as ``-m`` or a registry would load it.
BARE_MODULE = re.compile(rf"^(?:{'|'.join(ROOMS)})(?:\.\w+)+(?::\w+)?$")
#: Files whose strings name rooms' modules as the layering rules and the docs do (by their folder), or
#: that build outside projects with packages of their own.
SHORT_NAMES_ON_PURPOSE = {
    "tests/test_layering.py",
    "tests/test_namespace.py",
    "tests/docs/test_architecture_doc.py",
    "tests/harness/soak/verdicts/test_judgement.py",
    "tests/matrix/test_input_freshness.py",
}
COMMAND_LINE = re.compile(rf"(?:-m|-p)\s+(?:{'|'.join(ROOMS)})\.")


def _python_files() -> Iterator[Path]:
    for tree in PYTHON_TREES:
        for path in sorted((REPO / tree).rglob("*.py")):
            if "evidence" not in path.relative_to(REPO).parts and not path.parent.is_symlink():
                yield path


def _is_module(dotted: str) -> bool:
    base = REPO / dotted.partition(":")[0].replace(".", "/")
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def bare_imports(path: Path) -> list[str]:
    """``line: module`` for each import of a room by its bare name in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{node.lineno}: {name}" for name in names if name.split(".")[0] in ROOMS]
    return found


def bare_module_strings(path: Path) -> list[str]:
    """``line: text`` for each string constant in ``path`` that names a real module by its bare name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if BARE_MODULE.match(node.value) and _is_module(node.value)
    ]


def test_no_file_imports_a_room_by_its_bare_name() -> None:
    found = [f"{p.relative_to(REPO)}:{hit}" for p in _python_files() for hit in bare_imports(p)]
    assert found == []


def test_no_code_names_a_room_module_by_its_bare_name() -> None:
    found = [
        f"{rel}:{hit}"
        for path in _python_files()
        if (rel := path.relative_to(REPO).as_posix()) not in SHORT_NAMES_ON_PURPOSE
        for hit in bare_module_strings(path)
    ]
    assert found == []


def test_no_command_line_runs_a_room_by_its_bare_name() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*.md", "*.sh", "*.toml", "Makefile", ".ci/*"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    found = [
        f"{name}:{number}: {line.strip()}"
        for name in tracked
        if not name.startswith("matrix/evidence/")
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1)
        if COMMAND_LINE.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import runtime.cli\nfrom soakbench.matrix import cli\n", ["1: runtime.cli"]),
        ("def f():\n    from harness.soak import cli\n", ["2: harness.soak"]),
        ("from .sibling import x\nimport runtimes\n", []),
    ],
)
def test_the_import_check_sees_a_bare_import(tmp_path: Path, source: str, expected: list[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert bare_imports(path) == expected


def test_the_string_check_sees_a_registry_entry(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        'A = "runtime.backends.mujoco:MujocoBackend"\nB = "soakbench.runtime.cli"\nC = "matrix.png"\n'
    )
    assert bare_module_strings(path) == ["1: runtime.backends.mujoco:MujocoBackend"]


@pytest.mark.slow
def test_the_commands_and_registries_load_no_bare_room() -> None:
    code = (
        "import importlib, sys\n"
        "import soakbench.matrix.cli, soakbench.harness.soak.cli, soakbench.harness.probe.cli\n"
        "import soakbench.runtime.cli, soakbench.matrix.pytest_cell\n"
        "from soakbench.runtime.tasks import TASKS, task_class\n"
        "from soakbench.runtime.backends import BACKENDS, backend_class\n"
        "from soakbench.runtime.learners import LEARNERS\n"
        "[task_class(n) for n in TASKS]; [backend_class(n) for n in BACKENDS]\n"
        "[importlib.import_module(m) for m, _, _ in LEARNERS.values()]\n"
        "from soakbench.foundation import schema\n"  # package data is found by package name
        "[schema.load_schema(p.name) for p in schema.schema_root().iterdir() if p.name.endswith('.json')]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{ROOMS!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
