"""No tracked Python module of the project grows past 500 lines: a longer one is split along its seams."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("foundation", "runtime", "harness", "matrix", "scripts", "benchmarks", "tests")
MAX_LINES = 500


def tracked_python_files() -> list[Path]:
    """The ``*.py`` files git tracks under ROOTS, relative to the repository."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"`git ls-files` failed in {REPO} (exit {done.returncode}): {done.stderr.strip()}")
    paths = [Path(name) for name in done.stdout.split("\0") if name]
    return [p for p in paths if p.parts[0] in ROOTS]


def oversized(repo: Path, paths: Iterable[Path], limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` for each file over ``limit`` lines, longest first."""
    counts = [(len((repo / p).read_text(encoding="utf-8").splitlines()), p) for p in paths]
    return [f"{p}: {n} lines" for n, p in sorted(counts, key=lambda c: (-c[0], str(c[1]))) if n > limit]


def test_no_tracked_module_is_over_500_lines() -> None:
    paths = tracked_python_files()
    assert paths, "git tracks no Python file under " + ", ".join(ROOTS)
    offenders = oversized(REPO, paths)
    assert not offenders, f"modules over {MAX_LINES} lines (split them):\n  " + "\n  ".join(offenders)


def test_the_size_check_names_each_offender_with_its_count(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "longer.py").write_text("x = 1\n" * (MAX_LINES + 7))
    paths = [Path("short.py"), Path("long.py"), Path("longer.py")]
    assert oversized(tmp_path, paths) == ["longer.py: 507 lines", "long.py: 501 lines"]
