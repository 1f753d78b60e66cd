"""The lane's order (heavy units longest first, then collection order, then exclusive units) and its
host lock: under real pytest-xdist workers an ``exclusive`` test never overlaps another test."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.lane import lane_order, plain_id, recorded_durations

REPO = Path(__file__).resolve().parents[1]


@dataclass
class _Mark:
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Item:
    nodeid: str
    marks: dict[str, _Mark] = field(default_factory=dict)

    def get_closest_marker(self, name: str) -> _Mark | None:
        return self.marks.get(name)


def _order(items: list[_Item], durations: dict[str, float]) -> list[str]:
    return [item.nodeid for item in lane_order(items, durations)]  # type: ignore[arg-type]


def test_heavy_units_go_first_longest_first_and_light_ones_keep_their_order() -> None:
    items = [_Item(f"t.py::{name}") for name in ("a", "b", "heavy", "c", "heavier")]
    durations = {"t.py::a": 0.4, "t.py::b": 0.1, "t.py::heavy": 30.0, "t.py::c": 4.9, "t.py::heavier": 90.0}
    assert _order(items, durations) == ["t.py::heavier", "t.py::heavy", "t.py::a", "t.py::b", "t.py::c"]


def test_a_group_is_one_unit_weighed_by_its_sum_and_exclusive_tests_close() -> None:
    group = {"xdist_group": _Mark(("smokes",))}
    items = [
        _Item("t.py::light"),
        _Item("t.py::g1@smokes", dict(group)),
        _Item("t.py::single"),
        _Item("t.py::g2@smokes", dict(group)),
        _Item("t.py::alone", {"exclusive": _Mark()}),
    ]
    durations = {"t.py::g1": 20.0, "t.py::g2": 20.0, "t.py::single": 30.0, "t.py::alone": 1.0}
    # the group (40 s in all) outweighs the 30 s test, and its members stay together in their order
    assert _order(items, durations) == [
        "t.py::g1@smokes",
        "t.py::g2@smokes",
        "t.py::single",
        "t.py::light",
        "t.py::alone",
    ]


def test_plain_id_strips_only_the_group_suffix() -> None:
    assert plain_id("t.py::x[a@b]@smokes", "smokes") == "t.py::x[a@b]"
    assert plain_id("t.py::x[a@b]", None) == "t.py::x[a@b]"


def test_the_committed_durations_cover_the_suites_heaviest_tests() -> None:
    durations = recorded_durations()
    assert (
        durations[
            "tests/benchmarks/test_learning_smoke.py::test_the_benchmark_smoke_outlives_random_actions_by_its_calibrated_floor"
        ]
        > 60
    )
    assert all(seconds >= 0 for seconds in durations.values())


def test_a_malformed_durations_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "durations.json"
    bad.write_text('{"durations": {"t.py::a": "slow"}}')
    with pytest.raises(pytest.UsageError, match=r"durations.json.*seconds"):
        recorded_durations(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(pytest.UsageError, match=r"durations.json"):
        recorded_durations(bad)


LOCK_TESTS = """
import json, os, time
from pathlib import Path
import pytest

LOG = Path(os.environ["LANE_LOG"])

def _span(name, seconds):
    start = time.monotonic()
    time.sleep(seconds)
    with LOG.open("a") as fh:
        fh.write(json.dumps({"name": name, "start": start, "end": time.monotonic()}) + "\\n")

@pytest.mark.exclusive
def test_alone():
    _span("alone", 1.0)

@pytest.mark.parametrize("n", range(8))
def test_shared(n):
    _span(f"shared{n}", 0.3)
"""


def _two_workers(folder: Path, log: Path) -> None:
    """Run the test files in ``folder`` under two real xdist workers as `make test` runs them (the lane
    plugin loaded, ``LANE_LOG`` naming ``log``); fails the calling test unless every test passed."""
    env = {**os.environ, "LANE_LOG": str(log), "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
            "--no-loadscope-reorder", "--rootdir", str(folder), "--basetemp", str(folder / "base")]  # fmt: skip
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.linux_only
def test_an_exclusive_test_runs_alone_under_two_workers(tmp_path: Path) -> None:
    (tmp_path / "test_locks.py").write_text(LOCK_TESTS)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.lane"]\n')
    log = tmp_path / "spans.jsonl"
    _two_workers(tmp_path, log)
    spans = {s["name"]: s for s in map(json.loads, log.read_text().splitlines())}
    assert len(spans) == 9
    alone = spans.pop("alone")
    overlapping = [n for n, s in spans.items() if s["start"] < alone["end"] and s["end"] > alone["start"]]
    assert overlapping == []
    # the shared tests did run two at a time: the lock is shared, not a global serialisation
    shared = sorted(spans.values(), key=lambda s: s["start"])
    assert any(b["start"] < a["end"] for a, b in itertools.pairwise(shared))


GROUP_TESTS = """
import os
from pathlib import Path
import pytest

pytestmark = pytest.mark.xdist_group("together")

@pytest.mark.parametrize("n", range(6))
def test_member(n):
    with Path(os.environ["LANE_LOG"]).open("a") as fh:
        fh.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


@pytest.mark.linux_only
def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    """The locked pytest and pytest-xdist keep a group together (pytest 9.2 broke xdist's group ids)."""
    (tmp_path / "test_group.py").write_text(GROUP_TESTS)
    (tmp_path / "test_other.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.lane"]\n')
    log = tmp_path / "workers.txt"
    _two_workers(tmp_path, log)
    workers = log.read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers
