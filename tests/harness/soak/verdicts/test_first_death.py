"""The first descendant gone before the root (pure): the cascade's earliest, not an old helper."""

from __future__ import annotations

import signal
from typing import Any

from harness.soak.verdicts.first_death import death_sentence, exit_text, first_death


def _p(pid: int, role: str = "worker", **extra: Any) -> dict[str, Any]:
    return {"pid": pid, "start_ticks": pid * 10, "name": "python", "role": role, **extra}


def _samples(alive: list[list[int]], step: float = 1.0) -> list[dict[str, Any]]:
    return [{"t": i * step, "processes": [_p(pid, "trainer" if pid == 1 else "worker") for pid in pids]}
            for i, pids in enumerate(alive)]  # fmt: skip


def test_the_earliest_of_the_cascade_is_named_with_the_time_it_went() -> None:
    # pid 3 dies first, the root then stops pid 2 and pid 4, then exits
    samples = _samples([[1, 2, 3, 4]] * 5 + [[1, 2, 4], [1, 2], [1]])
    death = first_death(samples, root_pid=1, reaped={})
    assert death is not None and death["pid"] == 3
    assert (death["last_seen_t"], death["gone_by_t"], death["before_root_s"]) == (4.0, 5.0, 2.0)
    assert death_sentence(death) == (
        "first death: pid 3 (worker) went between t=4 s and t=5 s, at least 2 s before the root's last sample; "
        "exit status not observable (reaped by its own parent)"
    )


def test_an_old_helper_a_passing_process_and_the_roots_own_end_are_not_blamed() -> None:
    helper_then_quiet = _samples([[1, 9], [1, 9]] + [[1, 2]] * 70)  # pid 9 left 70 s before the end
    assert first_death(helper_then_quiet, 1, {}) is None  # pid 2 lived as long as the root
    one_sample = _samples([[1, 2], [1, 2, 7], [1, 2], [1, 2]])  # pid 7 seen once
    assert first_death(one_sample, 1, {}) is None
    assert first_death(_samples([[2, 3]]), 1, {}) is None  # the root was never seen


def test_a_rank_and_a_status_the_monitor_reaped_are_named() -> None:
    samples = [{"t": float(i), "processes": [_p(1, "trainer"), _p(5, "trainer", rank=1)]} for i in range(3)]
    samples.append({"t": 3.0, "processes": [_p(1, "trainer")]})
    death = first_death(samples, 1, {(5, 50): -signal.SIGKILL})
    assert death is not None and death["rank"] == 1 and death["exit"] == "killed by SIGKILL"
    assert death_sentence(death).startswith("first death: rank 1 pid 5 (trainer)")
    assert exit_text(3) == "exit code 3"


def test_processes_gone_in_the_same_interval_are_named_together() -> None:
    samples = _samples([[1, 2, 3, 4]] * 3 + [[1, 4], [1]])
    death = first_death(samples, 1, {})
    assert death is not None and death["pid"] == 2 and death["together"] == ["pid 3 (worker)"]
    assert (
        "first death: pid 2 (worker) (with pid 3 (worker) in the same interval) went between"
        in death_sentence(death)
    )
