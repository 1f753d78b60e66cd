"""Leak verdicts per process identity (harness/soak/verdicts/per_process.py) on synthetic sample streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soakbench.harness.soak.host.procs import totals_of
from soakbench.harness.soak.verdicts.evaluation import MonitorObservation, evaluate
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.per_process import (
    MIN_WINDOW_COVERAGE,
    failing_processes,
    per_process_verdicts,
    rate_text,
)
from soakbench.harness.soak.verdicts.trends import MIB, leak_verdicts
from tests.harness.soak._observations import split

Level = Callable[[float], float]


def _record(pid: int, role: str, fds: int, threads: int = 4, pss: int = 100 * MIB) -> dict[str, Any]:
    return {
        "pid": pid,
        "start_ticks": 1000 + pid,
        "ppid": 1 if role == "trainer" else 100,
        "name": "python",
        "role": role,
        "cmdline": ["python", f"proc{pid}"],
        "rss_bytes": pss + 50 * MIB,
        "pss_bytes": pss,
        "uss_bytes": pss - 10 * MIB,
        "swap_bytes": 0,
        "threads": threads,
        "cpu_s": 0.0,
        "fds": {"eventfd": 0, "shared_memory": 0, "total": fds},
        "gpu_memory_bytes": None,
    }


def _stream(
    duration: float, dt: float, procs: dict[int, tuple[str, float, float, Level]]
) -> list[dict[str, Any]]:
    """Samples every dt s; procs: pid -> (role, first t, last t, fd level at t)."""
    samples = []
    for i in range(int(duration / dt) + 1):
        t = round(i * dt, 6)
        records = [
            _record(pid, role, round(level(t)))
            for pid, (role, first, last, level) in procs.items()
            if first <= t <= last
        ]
        samples.append({"t": t, "totals": totals_of(records, gpu_available=False), "processes": records})
    return samples


def _child_exits_before_parent() -> list[dict[str, Any]]:
    """The case the tree verdict misses: a child grows 26 -> 152 fds over 40 s and exits 3 s before its
    parent, so its drop lands in the last quarter of the tree's window."""
    return _stream(
        48.0,
        0.25,
        {
            100: ("trainer", 0.0, 48.0, lambda t: 20.0),
            101: ("worker", 5.0, 45.0, lambda t: 26.0 + 126.0 * (t - 5.0) / 40.0),
        },
    )


def test_child_that_exits_before_its_parent_fails_per_process_while_the_tree_says_bounded() -> None:
    samples = _child_exits_before_parent()
    tree = leak_verdicts(samples, 2.0)
    assert tree.verdicts["fd_total"] == "bounded"
    assert "growth stopped" in tree.trends["fd_total"]["reason"]
    per = per_process_verdicts(samples, 2.0)
    child = next(p for p in per.processes if p.pid == 101)
    assert child.judged and child.window_coverage >= MIN_WINDOW_COVERAGE
    assert child.leak_verdicts["fd_total"] == "growing" and child.failing == ("fd_total",)
    assert child.peaks["fd_total"] == 152 and child.role == "worker"
    parent = next(p for p in per.processes if p.pid == 100)
    assert parent.leak_verdicts["fd_total"] == "bounded" and parent.failing == ()
    ev = evaluate(*_observation(tree, per))
    assert ev.status == "failed" and ev.failure_classification == "resource_leak"
    assert ev.failure_reason is not None
    assert "worker (pid 101): fd_total growing +3.15/s" in ev.failure_reason


def _observation(tree: dict[str, Any], per: dict[str, Any] | None) -> tuple[MonitorObservation, Gates]:
    return split(
        mode="monitor",
        monitor_failure=None,
        trainer_returncode=0,
        run_summary=None,
        residual_processes=[],
        orphaned_shm_segments=[],
        leak_verdicts=tree,
        duration_s=48.0,
        min_duration_s=0.0,
        observation={"min_trend_samples": 8, "classes": {"fd_total": {"status": "observed", "samples": 100}}},
        per_process=per,
    )


def test_a_growing_process_of_a_torchrun_rank_is_named_with_its_rank() -> None:
    samples = _child_exits_before_parent()
    for sample in samples:
        for record in sample["processes"]:
            record["rank"] = 1 if record["pid"] == 101 else 0
    per = per_process_verdicts(samples, 2.0)
    assert {p.pid: p.rank for p in per.processes} == {100: 0, 101: 1}
    assert failing_processes(per) == ["rank 1 worker (pid 101): fd_total growing +3.15/s"]
    untagged = per_process_verdicts(_child_exits_before_parent(), 2.0)
    assert all(p.rank is None for p in untagged.processes)
    assert failing_processes(untagged) == ["worker (pid 101): fd_total growing +3.15/s"]


def test_short_lived_grower_is_reported_not_failed() -> None:
    """A compiler-like process that grows for its whole 6 s life inside a 40 s window is listed as
    growing but is not judged."""
    samples = _stream(
        60.0,
        0.25,
        {
            100: ("trainer", 0.0, 60.0, lambda t: 30.0),
            102: ("other", 30.0, 36.0, lambda t: 10.0 + 10.0 * (t - 30.0)),
        },
    )
    per = per_process_verdicts(samples, 2.0)
    short = next(p for p in per.processes if p.pid == 102)
    assert short.growing == ("fd_total",) and not short.judged and short.failing == ()
    assert short.window_coverage < MIN_WINDOW_COVERAGE
    ev = evaluate(*_observation(leak_verdicts(samples, 2.0), per))
    leak_row = next(c for c in ev.criteria if c.name == "leak_verdicts")
    assert leak_row.result == "pass" and leak_row.value["processes"] == []


def test_per_process_without_a_window_is_insufficient_and_unjudged() -> None:
    samples = _child_exits_before_parent()
    per = per_process_verdicts(samples, None)
    assert per.window is None
    assert all(not p.judged for p in per.processes)
    assert {v for p in per.processes for v in p.leak_verdicts.values()} == {"insufficient_data"}


def test_a_pid_reused_by_another_process_is_another_identity() -> None:
    samples = _stream(20.0, 0.5, {100: ("trainer", 0.0, 20.0, lambda t: 10.0)})
    for sample in samples[20:]:
        sample["processes"][0]["start_ticks"] = 9999
    per = per_process_verdicts(samples, 1.0)
    assert sorted(p.start_ticks for p in per.processes) == [1100, 9999]


def test_malformed_process_record_is_named() -> None:
    samples = _stream(5.0, 0.5, {100: ("trainer", 0.0, 5.0, lambda t: 10.0)})
    samples[3]["processes"][0]["pid"] = "x"
    with pytest.raises(ValueError, match=r"samples\[3\]\.processes: pid and start_ticks must be integers"):
        per_process_verdicts(samples, 1.0)


def test_rss_growth_alone_is_reported_not_failed() -> None:
    """Summed RSS counts a shared page once per process that maps it; only PSS can fail the soak."""
    samples = _stream(60.0, 0.25, {100: ("trainer", 0.0, 60.0, lambda t: 10.0)})
    for sample in samples:
        sample["totals"]["rss_bytes"] = int(1000 * MIB + 20 * MIB * sample["t"])
    tree = leak_verdicts(samples, 2.0)
    assert tree.verdicts["rss"] == "growing" and tree.trends["rss"]["judged"] is False
    assert tree.verdicts["pss"] == "bounded" and tree.trends["pss"]["judged"] is True
    ev = evaluate(*_observation(tree, per_process_verdicts(samples, 2.0)))
    assert next(c for c in ev.criteria if c.name == "leak_verdicts").result == "pass"


@pytest.mark.parametrize(
    ("slope", "unit", "text"),
    [(1 / 12, "count", "+1 per 12 s"), (3.5, "count", "+3.5/s"), (2.5 * MIB, "bytes", "+2.5 MiB/s")],
)
def test_rate_text(slope: float, unit: str, text: str) -> None:
    assert rate_text(slope, unit) == text
