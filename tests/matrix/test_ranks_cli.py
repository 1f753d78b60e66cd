"""A 2-rank cell end to end in a temporary repository: `matrix ingest | generate | check | explain` grade it
from 2-rank evidence only, give it its own grid row and anchor, and leave the single-rank cell as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.matrix._fixtures import (
    BOUND_TESTS,
    INVENTORY,
    commit_all,
    git,
    junit_xml,
    probe_artifact,
    soak_artifact,
    write_json,
)
from tests.matrix.conftest import Invoke, cell
from tests.matrix.test_cli import SAC_WALK, ingest_ok, snapshot

TWO_RANK_CELL = """\
  - algo: sac
    task: g1_walk_flat
    backend: mujoco
    platform: linux-cpu
    ranks: 2
    tests: {lane: cpu, min_passed: 2, kinds: [train, soak]}
    probe_required: true
    soak: {min_duration_s: 60, num_envs: 8, iterations: 100}
"""
TWO_RANK_TESTS = """

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train", ranks=2)
def test_sac_walk_two_ranks():
    pass


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="soak", ranks=2)
def test_sac_walk_two_rank_soak():
    pass
"""


@pytest.fixture
def two_rank_repo(repo: Path) -> Path:
    """The fixture repo with a 2-rank sac/g1_walk_flat/mujoco@linux-cpu cell and its bound tests."""
    (repo / "matrix" / "inventory.yaml").write_text(INVENTORY + TWO_RANK_CELL)
    (repo / "tests" / "test_bound.py").write_text(BOUND_TESTS + TWO_RANK_TESTS)
    commit_all(repo, "a 2-rank cell")
    return repo


def _soak(run_matrix: Invoke, tmp: Path, name: str, head: str, nproc: int) -> str:
    path = write_json(tmp / name / "soak.json", soak_artifact(head, nproc_per_node=nproc))
    return ingest_ok(run_matrix, path, "--platform", "linux-cpu")


def test_the_two_rank_cell_is_benchmarked_from_two_rank_evidence_only(
    two_rank_repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    repo = two_rank_repo
    assert run_matrix("generate").exit_code == 0
    before = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp_path / "junit.xml"
    two = f"{SAC_WALK}/ranks=2"
    xml.write_text(
        junit_xml(
            head, [("test_sac_walk_two_ranks", two, "passed"), ("test_sac_walk_two_rank_soak", two, "passed")]
        )
    )
    assert f"covers: {two}" in ingest_ok(run_matrix, xml)
    ingest_ok(
        run_matrix, write_json(tmp_path / "probe.json", probe_artifact(head)), "--platform", "linux-cpu"
    )
    said = _soak(run_matrix, tmp_path, "two", head, 2)
    assert f"covers: {SAC_WALK} (2 ranks)" in said and "_g1_walk_flat_mujoco_2ranks-" in said
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu", ranks=2)
    assert got["grade"] == "Benchmarked" and all(e["counts"] for e in got["evidence"])
    # the single-rank cell sees the probe only (physics alone covers every rank count): no grade from
    # the 2-rank JUnit and soak
    single = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert before["grade"] == single["grade"] == "Configured"
    assert [e["kind"] for e in single["evidence"]] == ["probe"]
    assert single["blockers"][:2] == [
        before["blockers"][0],
        {
            "grade": "Benchmarked",
            "reasons": ["no fresh, clean, passing linux-cpu soak artifact meeting the cell budget"],
        },
    ]
    commit_all(repo, "file evidence")
    assert run_matrix("check").exit_code == 0


def test_a_single_rank_soak_does_not_count_for_the_two_rank_cell(
    two_rank_repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = git(two_rank_repo, "rev-parse", "HEAD")
    ingest_ok(
        run_matrix, write_json(tmp_path / "probe.json", probe_artifact(head)), "--platform", "linux-cpu"
    )
    _soak(run_matrix, tmp_path, "one", head, 1)
    assert run_matrix("generate").exit_code == 0
    two = cell(two_rank_repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu", ranks=2)
    assert [e["kind"] for e in two["evidence"]] == ["probe"]
    benchmarked = dict((b["grade"], b["reasons"]) for b in two["blockers"])["Benchmarked"]
    assert benchmarked == [
        "no fresh, clean, passing linux-cpu soak artifact of 2 ranks (soak run --nproc-per-node 2) "
        "meeting the cell budget"
    ]


def test_a_soak_whose_world_size_contradicts_its_rank_count_is_refused(
    two_rank_repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = git(two_rank_repo, "rev-parse", "HEAD")
    before = snapshot(two_rank_repo)
    path = write_json(tmp_path / "soak.json", soak_artifact(head, nproc_per_node=2, world_size=3))
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 2
    assert "run_settings.nproc_per_node says 2 ranks but ranks.world_size is 3" in " ".join(
        result.output.split()
    )
    assert snapshot(two_rank_repo) == before


def test_the_grid_gives_the_two_rank_cell_its_own_row_and_anchor(
    two_rank_repo: Path, run_matrix: Invoke
) -> None:
    assert run_matrix("generate").exit_code == 0
    md = (two_rank_repo / "docs" / "support-matrix.md").read_text()
    assert "| sac | g1_walk_flat |" in md and "| sac | g1_walk_flat \u00b7 2 ranks |" in md
    assert "- sac/g1_walk_flat/mujoco@linux-cpu (2 ranks): **Configured**" in md
    html = (two_rank_repo / "reports" / "support-matrix.html").read_text()
    assert 'id="cell-sac-g1_walk_flat-mujoco-linux-cpu"' in html
    assert 'id="cell-sac-g1_walk_flat-mujoco-linux-cpu-2ranks"' in html
    assert 'data-cell="sac/g1_walk_flat/mujoco@linux-cpu (2 ranks)"' in html
    doc = json.loads((two_rank_repo / "reports" / "support-matrix.json").read_text())
    assert sorted(c["ranks"] for c in doc["cells"] if c["platform"] == "linux-cpu") == [1, 1, 1, 2]


def test_explain_takes_the_rank_count(two_rank_repo: Path, run_matrix: Invoke) -> None:
    out = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu", "--ranks", "2").output
    assert out.startswith("sac/g1_walk_flat/mujoco@linux-cpu (2 ranks): Configured")
    assert "bound tests in tests/ (read by matrix check): 2" in out
    assert "train at tests/test_bound.py:" in out and "(test_sac_walk_two_ranks)" in out
    single = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert "bound tests in tests/ (read by matrix check): 1" in single
    bad = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu", "--ranks", "0")
    assert bad.exit_code == 2 and "--ranks: 0 is not a rank count" in bad.output
    missing = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu", "--ranks", "3")
    assert missing.exit_code == 2 and "no cell sac/g1_walk_flat/mujoco@linux-cpu (3 ranks)" in missing.output
    assert "did you mean sac/g1_walk_flat/mujoco@linux-cpu (2 ranks)" in missing.output


def test_check_names_the_two_rank_cell_without_its_tests(two_rank_repo: Path, run_matrix: Invoke) -> None:
    (two_rank_repo / "tests" / "test_bound.py").write_text(BOUND_TESTS)
    commit_all(two_rank_repo, "the 2-rank tests went")
    assert run_matrix("generate").exit_code == 0
    result = run_matrix("check")
    assert result.exit_code == 1
    assert (
        "sac/g1_walk_flat/mujoco@linux-cpu (2 ranks): no test in tests/ is marked "
        "cell(sac, g1_walk_flat, mujoco, ranks=2)"
    ) in " ".join(result.output.split())
