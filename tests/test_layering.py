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


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute module a file imports, with its line (lazy imports inside functions included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
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
    bad.write_text("def f():\n    from harness.soak import cli\n    import matrix.cli\n")
    assert [m for _, m in imported_modules(bad)] == ["harness.soak", "matrix.cli"]


def test_foundation_imports_no_heavy_modules() -> None:
    code = (
        "import sys, foundation, foundation.atomic, foundation.schema, foundation.vocab, "
        "foundation.nvml, foundation.mps; "
        "print(sorted(m for m in ('torch', 'jsonschema', 'numpy', 'mujoco') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
