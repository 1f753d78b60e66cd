"""The pytest plugin records cell markers and run facts in real pytest JUnit XML, which ingests."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from soakbench.matrix.intake.junit import summarize_junit
from soakbench.matrix.model import cell_property
from tests.matrix._fixtures import commit_all
from tests.matrix.conftest import Invoke, cell

TESTS = """
import pytest

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
def test_bound_pass():
    assert 1 + 1 == 2

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
@pytest.mark.cell(algo="flashsac", task="g1_walk_flat", backend="mujoco")
def test_bound_twice():
    pass

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
def test_bound_skip():
    pytest.skip("not here")

def test_unbound():
    pass
"""


def run_lane(
    repo: Path, *extra: str, path: str = "lane_tests/test_lane.py"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "soakbench.matrix.pytest_cell", "-p", "no:cacheprovider",
         "-o", "markers=cell(algo, task, backend): cell", "--strict-markers", "--rootdir", str(repo),
         "--junitxml", str(repo / "runs" / "junit.xml"), *extra, path],
        cwd=repo, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_plugin_records_cells_and_facts_and_the_xml_ingests(repo: Path, run_matrix: Invoke) -> None:
    # the repository's bound tests are these: a lane that ingests holds every test bound at its commit
    (repo / "tests" / "test_bound.py").write_text(TESTS)
    head = commit_all(repo, "lane tests")
    done = run_lane(
        repo, "--matrix-platform", "linux-cpu", "--matrix-lane", "cpu", path="tests/test_bound.py"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    xml = repo / "runs" / "junit.xml"
    summary = summarize_junit(xml.read_bytes(), str(xml))
    loaded = summary["source"].pop("distributions")  # what the test process loaded, at the installed versions
    assert loaded["pytest"] == metadata.version("pytest")
    assert summary["source"] == {
        "commit": head,
        "dirty": False,
        "worktree_digest": summary["source"]["worktree_digest"],
        "python": platform.python_version(),  # the interpreter, an input of the evidence
    }
    assert (summary["platform"], summary["lane"], summary["gpu_available"]) == ("linux-cpu", "cpu", False)
    cells = {(c["algo"], c["task"], c["backend"]): c for c in summary["cells"]}
    assert set(cells) == {("sac", "g1_walk_flat", "mujoco"), ("flashsac", "g1_walk_flat", "mujoco")}
    sac = cells[("sac", "g1_walk_flat", "mujoco")]
    assert (sac["passed"], sac["skipped"], sac["failed"], sac["errors"]) == (2, 1, 0, 0)
    assert summary["totals"]["tests"] == 4
    result = run_matrix("ingest", str(xml))
    assert result.exit_code == 0, result.output
    assert run_matrix("generate").exit_code == 0
    # one of sac's bound tests was skipped, so that lane run cannot make it Tested; flashsac's one passed
    assert cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Configured"
    assert cell(repo, "flashsac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Tested"
    explained = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert "bound tests did not all pass: 1 skipped or xfailed (2 passed)" in explained


XFAIL_TESTS = """
import pytest

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
@pytest.mark.xfail(reason="known")
def test_bound_xpass():
    pass

@pytest.mark.xfail(reason="known")
def test_unbound_xpass():
    pass
"""


def test_a_bound_test_that_xpasses_fails(repo: Path) -> None:
    """JUnit XML shows a non-strict xpass as a pass; the plugin makes a bound one strict, so it fails."""
    (repo / "lane_tests").mkdir()
    (repo / "lane_tests" / "test_lane.py").write_text(XFAIL_TESTS)
    commit_all(repo, "lane tests")
    done = run_lane(repo, "--matrix-platform", "linux-cpu", "--matrix-lane", "cpu")
    assert done.returncode == 1, done.stdout + done.stderr
    xml = repo / "runs" / "junit.xml"
    summary = summarize_junit(xml.read_bytes(), str(xml))
    (sac,) = summary["cells"]
    assert (sac["passed"], sac["failed"]) == (0, 1)
    assert summary["totals"]["passed"] == 1  # the unbound xpass keeps pytest's default


def test_plugin_rejects_a_malformed_marker(repo: Path) -> None:
    (repo / "lane_tests").mkdir()
    (repo / "lane_tests" / "test_lane.py").write_text(
        'import pytest\n\n@pytest.mark.cell("sac", "g1_walk_flat")\ndef test_x():\n    pass\n'
    )
    done = run_lane(repo)
    assert done.returncode != 0 and "needs (algo, task, backend)" in done.stdout + done.stderr


RANKS_TESTS = """
import pytest

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train")
def test_one_rank():
    pass

@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train", ranks=2)
def test_two_ranks():
    pass
"""


def test_plugin_records_the_rank_count_of_a_multi_rank_binding(repo: Path) -> None:
    (repo / "lane_tests").mkdir()
    (repo / "lane_tests" / "test_lane.py").write_text(RANKS_TESTS)
    commit_all(repo, "lane tests")
    done = run_lane(repo, "--matrix-platform", "linux-cpu", "--matrix-lane", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    xml = repo / "runs" / "junit.xml"
    assert 'value="sac/g1_walk_flat/mujoco/ranks=2"' in xml.read_text()
    one, two = summarize_junit(xml.read_bytes(), str(xml))["cells"]
    assert "ranks" not in one and one["tests"] == ["lane_tests.test_lane::test_one_rank"]
    assert two["ranks"] == 2 and two["tests"] == ["lane_tests.test_lane::test_two_ranks"]


def _junit_summary(repo: Path, *extra: str) -> dict[str, object]:
    done = run_lane(repo, "--matrix-platform", "linux-cpu", "--matrix-lane", "cpu", *extra)
    assert done.returncode == 1, done.stdout + done.stderr  # the bound xpass fails in both
    xml = repo / "runs" / "junit.xml"
    summary = summarize_junit(xml.read_bytes(), str(xml))
    for entry in summary["cells"]:
        entry["tests"] = sorted(entry["tests"])  # workers finish in their own order
    return summary


def test_a_parallel_run_files_the_same_cells_and_counts_as_a_serial_one(repo: Path) -> None:
    """Under pytest-xdist the workers run the tests and the controller writes the JUnit XML: the cell
    properties travel with each report, the suite facts are the controller's, and the strict xpass
    rule holds in the workers."""
    (repo / "lane_tests").mkdir()
    body = TESTS + XFAIL_TESTS.replace("import pytest\n", "") + RANKS_TESTS.replace("import pytest\n", "")
    # a distribution only a test loads: under xdist only a worker holds it, and the controller records it
    body += "\n\ndef test_loads_a_distribution_of_its_own():\n    import junitparser  # noqa: F401\n"
    (repo / "lane_tests" / "test_lane.py").write_text(body)
    commit_all(repo, "lane tests")
    serial = _junit_summary(repo, "-p", "no:xdist")
    parallel = _junit_summary(repo, "-n", "2")
    assert parallel["cells"] == serial["cells"] and len(serial["cells"]) == 3
    assert parallel["totals"] == serial["totals"] and serial["totals"]["tests"] == 9
    facts = ("platform", "lane", "gpu_available")
    assert {k: parallel[k] for k in facts} == {k: serial[k] for k in facts}
    loaded = [summary["source"].pop("distributions") for summary in (serial, parallel)]  # type: ignore[attr-defined]
    assert parallel["source"] == serial["source"]
    for distributions in loaded:
        assert distributions["junitparser"] == metadata.version("junitparser")
    assert parallel["platform"] == "linux-cpu" and parallel["source"]["commit"]


def _cells_and_tests(summary: dict[str, object]) -> dict[str, list[str]]:
    cells = summary["cells"]
    assert isinstance(cells, list)
    return {
        cell_property(c["algo"], c["task"], c["backend"], c.get("ranks", 1)): sorted(c["tests"])
        for c in cells
    }


def test_only_cell_runs_the_tests_bound_to_the_named_cells_and_files_only_those(repo: Path) -> None:
    """An incremental lane: the named cells' bound tests run, every other test is deselected, and a test
    bound to a named cell and another one files a tally for the named cell only (the other cell's tally
    would hold part of its bound tests and could be mistaken for its whole set)."""
    (repo / "lane_tests").mkdir()
    (repo / "lane_tests" / "test_lane.py").write_text(TESTS + RANKS_TESTS.replace("import pytest\n", ""))
    commit_all(repo, "lane tests")
    for workers in (("-p", "no:xdist"), ("-n", "2")):
        done = run_lane(repo, "--matrix-platform", "linux-cpu", "--matrix-lane", "cpu", *workers,
                        "--matrix-only-cell", "flashsac/g1_walk_flat/mujoco",
                        "--matrix-only-cell", "sac/g1_walk_flat/mujoco/ranks=2")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 passed" in done.stdout and " failed" not in done.stdout, done.stdout
        xml = repo / "runs" / "junit.xml"
        summary = summarize_junit(xml.read_bytes(), str(xml))
        assert _cells_and_tests(summary) == {
            "flashsac/g1_walk_flat/mujoco": ["lane_tests.test_lane::test_bound_twice"],
            "sac/g1_walk_flat/mujoco/ranks=2": ["lane_tests.test_lane::test_two_ranks"],
        }
        assert summary["totals"]["tests"] == 2


def test_only_cell_refuses_a_cell_no_test_is_bound_to_and_a_malformed_cell(repo: Path) -> None:
    (repo / "lane_tests").mkdir()
    (repo / "lane_tests" / "test_lane.py").write_text(TESTS)
    commit_all(repo, "lane tests")
    for workers in (("-p", "no:xdist"), ("-n", "2")):  # an xdist worker hands its refusal to the controller
        done = run_lane(repo, *workers, "--matrix-only-cell", "sac/g1_walk_flat/mjwarp")
        out = done.stdout + done.stderr
        assert done.returncode == 4, out
        assert "no collected test is bound to sac/g1_walk_flat/mjwarp" in out, out
        assert "bound cells: flashsac/g1_walk_flat/mujoco, sac/g1_walk_flat/mujoco" in out, out
        assert "passed" not in done.stdout, "a refused lane runs no test"
    done = run_lane(repo, "--matrix-only-cell", "sac/g1_walk_flat")
    assert done.returncode == 4 and "'sac/g1_walk_flat' is not a cell" in done.stderr, done.stderr
