"""Matrix test wiring: a temporary git repo and a CLI runner whose runtime facts are test doubles."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from soakbench.matrix import cli as matrix_cli
from tests.matrix._fixtures import REGISTRY, configured_ok, make_repo

Invoke = Callable[..., Result]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def run_matrix(monkeypatch: pytest.MonkeyPatch, repo: Path) -> Invoke:
    """``run_matrix("generate")`` -> typer Result, run against ``repo`` with the fake runtime facts."""
    monkeypatch.setattr(matrix_cli, "runtime_inputs", lambda: (REGISTRY, configured_ok))
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(matrix_cli.app, [*args, "--repo", str(repo)])

    return invoke


def cell(repo: Path, algo: str, task: str, backend: str, platform: str, ranks: int = 1) -> dict[str, Any]:
    """One cell of the generated reports/support-matrix.json (of ``ranks`` ranks)."""
    doc = json.loads((repo / "reports" / "support-matrix.json").read_text())
    found: dict[str, Any]
    (found,) = [
        c
        for c in doc["cells"]
        if (c["algo"], c["task"], c["backend"], c["platform"], c["ranks"])
        == (algo, task, backend, platform, ranks)
    ]
    return found
