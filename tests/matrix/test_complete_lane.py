"""A JUnit summary counts for a cell only when it holds every test bound to that cell at its commit, and a
test of every kind the cell requires: a lane that deselected a bound test is refused at ingest, and one
filed without it (before the rule, or by hand) leaves the cell short of Tested, naming the test."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.matrix._fixtures import INVENTORY, commit_all, git, junit_xml
from tests.matrix.conftest import Invoke, cell

SAC_WALK = "sac/g1_walk_flat/mujoco"
SECOND_TEST = """

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_sac_walk_fault():
    pass
"""
DESELECTED = [("test_sac_walk_mujoco", SAC_WALK, "passed")]  # -k "not fault"
WHOLE = [*DESELECTED, ("test_sac_walk_fault", SAC_WALK, "passed")]


def _snapshot(repo: Path) -> dict[str, bytes]:
    return {
        p.relative_to(repo).as_posix(): p.read_bytes() for p in (repo / "matrix").rglob("*") if p.is_file()
    }


def _with_fault_test(repo: Path) -> str:
    with (repo / "tests" / "test_bound.py").open("a") as fh:
        fh.write(SECOND_TEST)
    return commit_all(repo, "a fault test for sac/g1_walk_flat/mujoco")


def test_a_lane_that_deselected_a_bound_test_is_refused_naming_it(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = _with_fault_test(repo)
    xml = tmp_path / "junit.xml"
    xml.write_text(junit_xml(head, DESELECTED))
    before = _snapshot(repo)
    result = run_matrix("ingest", str(xml))
    assert result.exit_code == 2, result.output
    assert f"cells[{SAC_WALK}].tests" in result.output
    assert "tests.test_bound::test_sac_walk_fault" in result.output
    assert _snapshot(repo) == before  # nothing written
    xml.write_text(junit_xml(head, WHOLE))
    assert run_matrix("ingest", str(xml)).exit_code == 0


def _file_by_hand(repo: Path, tmp_path: Path, run_matrix: Invoke, head: str) -> str:
    """File a whole lane, then drop the fault test from the filed summary as an older ingest (or a hand
    that wanted a better grade) would have left it, index digest updated."""
    xml = tmp_path / "junit.xml"
    xml.write_text(junit_xml(head, WHOLE))
    assert run_matrix("ingest", str(xml)).exit_code == 0
    index_path = repo / "matrix" / "evidence" / "index.json"
    index = json.loads(index_path.read_text())
    (entry,) = index["entries"]
    filed = repo / entry["file"]
    doc = json.loads(filed.read_text())
    (walk,) = [c for c in doc["cells"] if (c["algo"], c["backend"]) == ("sac", "mujoco")]
    walk["tests"] = [t for t in walk["tests"] if not t.endswith("::test_sac_walk_fault")]
    walk["passed"] -= 1
    doc["totals"]["tests"] -= 1
    doc["totals"]["passed"] -= 1
    filed.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    entry["sha256"] = hashlib.sha256(filed.read_bytes()).hexdigest()
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return str(entry["id"])


def test_a_filed_summary_without_a_bound_test_does_not_grant_tested(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = _with_fault_test(repo)
    ev_id = _file_by_hand(repo, tmp_path, run_matrix, head)
    generated = run_matrix("generate")
    assert generated.exit_code == 0
    assert f"does not count for {SAC_WALK}: {ev_id}: incomplete" in generated.output
    assert "tests.test_bound::test_sac_walk_fault" in generated.output
    walk = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert walk["grade"] == "Configured"
    (verdict,) = [v for v in walk["evidence"] if v["id"] == ev_id]
    assert verdict["counts"] is False
    assert verdict["verdict"] == (
        f"incomplete: 1 test(s) bound at {head[:12]} missing from the lane: tests.test_bound::test_sac_walk_fault"
    )
    explained = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert "tests.test_bound::test_sac_walk_fault" in explained.output
    # the fixture JUnit XML carries no matrix.python nor matrix.distributions: its manifest says so
    assert "      unrecorded inputs: interpreter, loaded versions\n" in explained.output


def test_a_kind_the_cell_now_requires_must_be_bound_at_the_evidence_commit(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp_path / "junit.xml"
    xml.write_text(junit_xml(head, DESELECTED))  # complete at this commit: one train test is bound
    assert run_matrix("ingest", str(xml)).exit_code == 0
    # the fault test comes in a file of its own, which the filed summary's inputs never recorded
    (repo / "tests" / "test_fault.py").write_text("import pytest" + SECOND_TEST)
    inventory = INVENTORY.replace(
        "tests: {lane: cpu, min_passed: 1}", "tests: {lane: cpu, min_passed: 2, kinds: [train, fault]}", 1
    )
    (repo / "matrix" / "inventory.yaml").write_text(inventory)
    commit_all(repo, "sac/g1_walk_flat/mujoco requires a fault test")
    assert run_matrix("generate").exit_code == 0
    walk = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert walk["grade"] == "Configured"
    verdicts = [v["verdict"] for v in walk["evidence"] if v["kind"] == "junit"]
    assert verdicts == [f"incomplete: no test of kind fault is bound to this cell at {head[:12]}"]
