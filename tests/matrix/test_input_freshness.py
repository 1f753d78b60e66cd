"""Per-cell freshness end to end in a temporary git repo: evidence filed with input manifests stays fresh
through changes that are not its inputs, and exactly the cells whose inputs changed go historical, with
the changed input named by ``explain``, listed by ``affected`` and ``stale``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.verdicts import judgement
from soakbench.matrix import cli as matrix_cli
from soakbench.matrix.declared.runtime_facts import CellSources
from soakbench.matrix.model import CellKey
from tests.matrix._fixtures import (
    commit_all,
    git,
    junit_xml,
    soak_artifact,
    write_json,
)
from tests.matrix.conftest import Invoke, cell
from tests.matrix.test_probe_evidence import REAL_PROBE

SAC = "sac/g1_walk_flat/mujoco"
FLASH = "flashsac/g1_walk_flat/mujoco"
SOURCES = {
    "runtime/core.py": "VALUE = 1\n",
    "runtime/physics.py": "import runtime.core\n\nSTEP = 1\n",
    "runtime/learners/__init__.py": "",
    "runtime/learners/sac.py": "import runtime.core\n\nGAMMA = 0.99\n",
    "runtime/learners/flashsac.py": "import runtime.core\n\nGAMMA = 0.98\n",
    "tests/test_sac_cell.py": "import runtime.learners.sac\n",
    "tests/test_flash_cell.py": "from runtime.learners import flashsac\n",
}


def fixture_sources(key: CellKey) -> CellSources:
    """The fixture project's cell sources: a learner module per algo beside shared physics."""
    if key.algo not in ("sac", "flashsac"):
        raise KeyError(key.algo)
    return CellSources(
        trainer=("runtime/core.py",),
        learner=f"runtime/learners/{key.algo}.py",
        physics=("runtime/physics.py",),
        data=(),
    )


@pytest.fixture
def project(repo: Path, run_matrix: Invoke, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(matrix_cli, "source_inputs", lambda: fixture_sources)
    for rel, text in SOURCES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo, "learners")
    return repo


def manifest(repo: Path, files: list[str], roles: tuple[str, ...]) -> dict[str, Any]:
    """An honest manifest of ``files`` at HEAD (their committed blob ids)."""
    blobs = {rel: git(repo, "rev-parse", f"HEAD:{rel}") for rel in files}
    return {
        "manifest_version": 1,
        "files": blobs,
        "distributions": {},
        "processes": [{"role": role, "pid": 100 + i, "files": len(files)} for i, role in enumerate(roles)],
    }


SOAK_ROLES = ("trainer", "collector", "monitor")


def learner_files(algo: str) -> list[str]:
    return [
        "runtime/core.py",
        "runtime/physics.py",
        "runtime/learners/__init__.py",
        f"runtime/learners/{algo}.py",
    ]


def file_everything(repo: Path, run_matrix: Invoke, tmp: Path) -> str:
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp / "junit.xml"
    cases = [("test_sac", SAC, "passed"), ("test_flash", FLASH, "passed")]
    # and the tests the fixture repo's tests/test_bound.py binds: a lane holds every bound test
    cases += [("test_sac_walk_mujoco", SAC, "passed"), ("test_flashsac_walk_mujoco", FLASH, "passed")]
    text = junit_xml(head, cases)
    for name, module in (("test_sac", "test_sac_cell"), ("test_flash", "test_flash_cell")):
        text = text.replace(
            f'classname="tests.test_bound" name="{name}"', f'classname="tests.{module}" name="{name}"'
        )
    xml.write_text(text)
    probe = json.loads(REAL_PROBE.read_text())  # a real 0.4.0 probe, as if made at HEAD
    probe["context"]["source"].update(commit=head, dirty=False)
    probe["inputs"] = manifest(
        repo, ["runtime/core.py", "runtime/physics.py"], ("probe", "probe-worker-mujoco")
    )
    pieces = [
        (xml, ()),
        (write_json(tmp / "probe.json", probe), ("--platform", "linux-cpu")),
    ]
    for algo in ("sac", "flashsac"):
        soak = soak_artifact(head, algo=algo, inputs=manifest(repo, learner_files(algo), SOAK_ROLES))
        pieces.append((write_json(tmp / f"soak-{algo}.json", soak), ("--platform", "linux-cpu")))
    for path, extra in pieces:
        result = run_matrix("ingest", str(path), *extra)
        assert result.exit_code == 0, result.output
    assert run_matrix("generate").exit_code == 0
    commit_all(repo, "evidence")
    return head  # the commit the evidence was made at


def grades(repo: Path) -> tuple[str, str]:
    return (
        cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"],
        cell(repo, "flashsac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"],
    )


def test_a_change_stales_exactly_the_cells_whose_inputs_it_touches(
    project: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    made_at = file_everything(project, run_matrix, tmp_path)
    assert grades(project) == ("Benchmarked", "Benchmarked")

    (project / "docs" / "notes.md").write_text("docs are no one's input\n")
    (project / "harness" / "tool.py").write_text("TOOL = 2  # not an input of these cells\n")
    commit_all(project, "docs and a harness module no evidence loaded")
    assert run_matrix("generate").exit_code == 0
    assert grades(project) == ("Benchmarked", "Benchmarked")

    (project / "runtime" / "learners" / "flashsac.py").write_text("import runtime.core\n\nGAMMA = 0.97\n")
    commit_all(project, "flashsac only")
    assert run_matrix("generate").exit_code == 0
    assert grades(project) == ("Benchmarked", "Configured")
    explained = run_matrix("explain", "flashsac", "g1_walk_flat", "mujoco", "linux-cpu").output
    # the change that made its evidence historical, and since which commit
    assert f"runtime/learners/flashsac.py changed since {made_at[:12]}" in explained

    affected = run_matrix("affected", "--since", "HEAD~1")
    assert affected.exit_code == 0, affected.output
    assert f"{FLASH}@linux-cpu: soak" in affected.output and f"{FLASH}@linux-cpu: junit" in affected.output
    assert not [line for line in affected.output.splitlines() if line.startswith(f"  {SAC}")]
    stale = run_matrix("stale", "--kind", "soak", "--words")
    assert stale.output.split("\n")[:-1] == ["flashsac g1_walk_flat mujoco 1"]

    (project / "runtime" / "core.py").write_text("VALUE = 2\n")  # uncommitted: every cell's input
    pending = run_matrix("affected")
    assert f"{SAC}@linux-cpu: soak" in pending.output and f"{SAC}@linux-cpu: probe" in pending.output
    assert "runtime/core.py changed" in pending.output


def test_editing_a_bound_test_stales_that_cells_tested_evidence(
    project: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    file_everything(project, run_matrix, tmp_path)
    (project / "tests" / "test_sac_cell.py").write_text(SOURCES["tests/test_sac_cell.py"] + "# edited\n")
    commit_all(project, "bound test edited")
    assert run_matrix("generate").exit_code == 0
    got = cell(project, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert got["grade"] == "Configured"
    junit = next(e for e in got["evidence"] if e["kind"] == "junit")
    assert junit["status"] == "historical" and "tests/test_sac_cell.py changed" in junit["verdict"]
    assert cell(project, "flashsac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Benchmarked"


def test_ingest_refuses_a_manifest_that_omits_a_module_its_cell_loads(
    project: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = git(project, "rev-parse", "HEAD")
    partial = manifest(project, ["runtime/learners/sac.py", "runtime/physics.py"], SOAK_ROLES)
    soak = soak_artifact(head, inputs=partial)
    result = run_matrix("ingest", str(write_json(tmp_path / "soak.json", soak)), "--platform", "linux-cpu")
    assert result.exit_code == 2
    assert "inputs.files" in result.output and "runtime/core.py" in result.output
    assert not (project / "matrix" / "evidence" / "index.json").exists()


def test_a_manifest_without_the_trainers_record_falls_back_to_the_whole_tree_rule(
    project: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = git(project, "rev-parse", "HEAD")
    soak = soak_artifact(head, inputs=manifest(project, learner_files("sac"), ("monitor",)))
    result = run_matrix("ingest", str(write_json(tmp_path / "soak.json", soak)), "--platform", "linux-cpu")
    assert result.exit_code == 0, result.output
    commit_all(project, "evidence")
    (project / "harness" / "tool.py").write_text("TOOL = 3\n")
    commit_all(project, "harness change")
    assert run_matrix("generate").exit_code == 0
    soak_verdict = next(
        e
        for e in cell(project, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["evidence"]
        if e["kind"] == "soak"
    )
    assert soak_verdict["status"] == "historical"
    assert "runtime fingerprint" in soak_verdict["verdict"]


def test_generate_rederives_every_filed_soak_verdict_with_heads_verdict_code(
    project: Path, run_matrix: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file_everything(project, run_matrix, tmp_path)
    assert run_matrix("check").exit_code == 0
    real = judgement.leak_verdicts

    def stricter(samples: Any, startup_end_t: Any) -> judgement.LeakTrends:
        """A HEAD whose leak rule calls PSS growing where the filed verdict said bounded."""
        result = real(samples, startup_end_t)
        return judgement.LeakTrends(verdicts={**result.verdicts, "pss": "growing"}, trends=result.trends)

    monkeypatch.setattr(judgement, "leak_verdicts", stricter)  # the one judgement the matrix calls
    assert run_matrix("generate").exit_code == 0
    got = cell(project, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    soak = next(e for e in got["evidence"] if e["kind"] == "soak")
    assert soak["status"] == "invalid" and not soak["counts"]
    assert (
        "HEAD's verdict code re-derives a different verdict" in soak["verdict"] and "pss" in soak["verdict"]
    )
    assert got["grade"] == "Tested"
