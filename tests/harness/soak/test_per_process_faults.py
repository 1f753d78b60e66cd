"""Per-process verdicts and memory measures under `soak monitor` over real fault programs (~5-10 s each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.soak._soakrun import SoakOutcome, assert_nothing_left, soak_monitor

pytestmark = pytest.mark.soak
MIB = 1 << 20


def _processes(outcome: SoakOutcome) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = outcome.artifact["resource_summary"]["per_process"]["processes"]
    return listed


def _samples(outcome: SoakOutcome) -> list[dict[str, Any]]:
    text = Path(outcome.artifact["samples_path"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_shared_segment_is_counted_twice_by_rss_and_once_by_pss(tmp_path: Path) -> None:
    # 8 s: longer than the 6 s staleness cap at 0.2 s sampling, so each process's PSS is read afresh after
    # the child has faulted the whole segment in, whatever the read schedule.
    outcome = soak_monitor(tmp_path, "shared_segment.py", "8")
    art = outcome.artifact
    assert outcome.returncode == 0, (art["failure_reason"], outcome.stderr[-2000:])
    # Samples of both processes alive: the one taken as the parent exits reads its memory as gone (RSS 0,
    # PSS unreadable), which is true of that instant and not what this test measures.
    both = [
        s
        for s in _samples(outcome)
        if len(s["processes"]) == 2
        and s["progress"] is not None
        and all(p["pss_bytes"] is not None for p in s["processes"])
    ]
    assert len(both) >= 5
    last = both[-1]["totals"]
    assert last["rss_bytes"] >= 2 * 256 * MIB  # each process's RSS holds the whole segment
    # A PSS value is carried between reads (rollup_age_samples), and one read before the child faulted
    # the segment in holds all of it: the split is measured from each process's last fresh read taken
    # once both hold the whole segment.
    fresh: dict[str, dict[str, Any]] = {}
    for sample in both:
        if all(p["rss_bytes"] >= 256 * MIB for p in sample["processes"]):
            fresh.update({p["role"]: p for p in sample["processes"] if p["rollup_age_samples"] == 0})
    assert set(fresh) == {"trainer", "worker"}, "each process read afresh once both hold the segment"
    pss = sum(p["pss_bytes"] for p in fresh.values())
    assert 256 * MIB <= pss < 256 * MIB + 128 * MIB  # PSS splits it between the two
    for proc in fresh.values():
        assert proc["rss_bytes"] >= 256 * MIB and proc["pss_bytes"] >= 128 * MIB
        assert proc["uss_bytes"] < 64 * MIB  # the segment is shared, so neither holds it privately
    assert {p["role"] for p in both[-1]["processes"]} == {"trainer", "worker"}
    assert art["resource_summary"]["leak_verdicts"]["pss"] == "bounded"
    assert art["resource_summary"]["peaks"]["pss_bytes"] < art["resource_summary"]["peaks"]["rss_bytes"]
    assert_nothing_left(outcome)


def test_one_leaking_worker_of_three_is_named_by_role_and_pid(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "leak_one_of_three.py", "5")
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "resource_leak"
    assert art["resource_summary"]["leak_verdicts"]["fd_total"] == "growing"  # the tree fails too
    workers = [p for p in _processes(outcome) if p["role"] == "worker"]
    assert len(workers) == 3
    failing = [p for p in workers if p["failing"]]
    assert len(failing) == 1 and failing[0]["command"][-3:-1] == ["1", "1"]  # index 1 is the leaker
    leaker = failing[0]
    assert "fd_total" in leaker["failing"] and leaker["judged"]
    reason = art["failure_reason"]
    assert f"worker (pid {leaker['pid']}): fd_total growing" in reason
    for other in workers:
        if other is not leaker:
            assert other["leak_verdicts"]["fd_total"] == "bounded"
            assert f"pid {other['pid']}" not in reason
    assert_nothing_left(outcome)


def test_thread_leak_fails_the_threads_class(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "leak_threads.py", "4")
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "resource_leak"
    assert art["resource_summary"]["leak_verdicts"]["threads"] == "growing"
    (root,) = [p for p in _processes(outcome) if p["pid"] == outcome.monitor["root_pid"]]
    assert root["role"] == "trainer" and root["failing"] == ["threads"]
    assert f"trainer (pid {root['pid']}): threads growing" in art["failure_reason"]
    assert_nothing_left(outcome)


def test_child_that_exits_just_before_its_parent_is_caught_per_process(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "child_exits_early.py", "8", "1.5")
    art = outcome.artifact
    trend = art["resource_summary"]["trends"]["fd_total"]
    assert trend["verdict"] == "bounded" and "growth stopped" in trend["reason"]  # the tree misses it
    assert outcome.returncode == 1 and art["failure_classification"] == "resource_leak"
    (child,) = [p for p in _processes(outcome) if p["pid"] != outcome.monitor["root_pid"]]
    assert child["judged"] and child["window_coverage"] >= 0.75
    assert "fd_total" in child["failing"] and "eventfd" in child["failing"]
    assert child["peaks"]["fd_total"] > 100
    assert f"worker (pid {child['pid']}): " in art["failure_reason"]
    assert_nothing_left(outcome)
