"""How the lane shares two cores under pytest-xdist (`make test`).

Order: tests (or ``xdist_group`` units, kept whole) whose recorded duration in ``tests/durations.json``
is at least ``HEAVY_SECONDS`` run first, longest first, so the long real runs start while short tests
fill the other workers; the rest keep their collection order (module fixtures stay shared). Tests marked
``exclusive`` (a timing premise that needs the host to itself) go after everything and run alone: every
test holds a shared lock on one file for its run, an exclusive test holds it exclusively, and a
turnstile lock keeps a waiting exclusive test from being starved by the other workers' stream of tests.
Last, because an exclusive test waits for every test running beside it to end: at the start that is a
long real run, at the end only the short tests that finish the lane.
Without xdist the locks are not taken. ``--record-durations PATH`` writes each test's measured
setup + call + teardown seconds from the run (docs/ci.md).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
HEAVY_SECONDS = 5.0
LOCK_NAME = "soakbench-lane.lock"


def recorded_durations(path: Path = DURATIONS) -> dict[str, float]:
    """Node id -> seconds, from the committed file; empty where there is none."""
    if not path.exists():
        return {}
    try:
        durations = json.loads(path.read_text())["durations"]
        return {str(nodeid): float(seconds) for nodeid, seconds in durations.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise pytest.UsageError(
            f'{path}: expected {{"durations": {{node id: seconds}}}} as --record-durations writes it '
            f"({type(exc).__name__}: {exc}); rewrite it with make test PYTEST_ARGS=--record-durations={path}"
        ) from None


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def plain_id(nodeid: str, group: str | None) -> str:
    """``nodeid`` without the ``@group`` suffix xdist gives the tests of an ``xdist_group``."""
    suffix = f"@{group}"
    return nodeid[: -len(suffix)] if group is not None and nodeid.endswith(suffix) else nodeid


def _unit(item: pytest.Item) -> str:
    group = _group(item)
    return item.nodeid if group is None else "@" + group


def lane_order(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """``items`` reordered: heavy units longest first, then the rest in order, then exclusive units."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)

    def rank(entry: tuple[int, tuple[str, list[pytest.Item]]]) -> tuple[int, float, int]:
        position, (_, members) = entry
        weight = sum(durations.get(plain_id(member.nodeid, _group(member)), 0.0) for member in members)
        if any(member.get_closest_marker("exclusive") for member in members):
            return (2, -weight, position)
        return (0, -weight, position) if weight >= HEAVY_SECONDS else (1, 0.0, position)

    ordered = sorted(enumerate(units.items()), key=rank)
    return [member for _, (_, members) in ordered for member in members]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("lane").addoption(
        "--record-durations",
        default=None,
        metavar="PATH",
        help="write each test's seconds (setup + call + teardown) to PATH as the lane's durations file",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "exclusive: a timing premise that needs the host to itself; under xdist it runs alone",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = lane_order(items, recorded_durations())


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid.rsplit("@", 1)[0] if "@" in report.nodeid.rsplit("::", 1)[-1] else report.nodeid
    _measured[nodeid] = _measured.get(nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("--record-durations")
    if target is None or hasattr(session.config, "workerinput"):  # the controller writes, not the workers
        return
    from soakbench.foundation.atomic import write_atomic

    rounded = {nodeid: round(seconds, 2) for nodeid, seconds in sorted(_measured.items())}
    document = {"unit": "seconds (setup + call + teardown)", "tests": len(rounded), "durations": rounded}
    write_atomic(target, json.dumps(document, indent=1) + "\n")


def _lock(path: Path, operation: int) -> int:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(descriptor, operation)
    return descriptor


def _release(descriptor: int) -> None:
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    os.close(descriptor)


@pytest.fixture(autouse=True)
def _host_share(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A shared hold on the host for the test; an exclusive one for an ``exclusive`` test."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # one folder for every worker of this run
    main, turnstile = root / LOCK_NAME, root / (LOCK_NAME + ".turnstile")
    exclusive = request.node.get_closest_marker("exclusive") is not None
    gate = _lock(turnstile, fcntl.LOCK_EX)
    try:
        hold = _lock(main, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        _release(gate)
    try:
        yield
    finally:
        _release(hold)
