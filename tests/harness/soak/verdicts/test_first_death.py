"""The first descendant gone before the root (pure): the cascade's earliest, not an old helper."""

from __future__ import annotations

import signal
from typing import Any

from soakbench.harness.soak.verdicts.first_death import death_sentence, exit_text, first_death, process_exits


def _p(pid: int, role: str = "worker", **extra: Any) -> dict[str, Any]:
    return {"pid": pid, "start_ticks": pid * 10, "name": "python", "role": role, **extra}


def _samples(alive: list[list[int]], step: float = 1.0) -> list[dict[str, Any]]:
    return [{"t": i * step, "processes": [_p(pid, "trainer" if pid == 1 else "worker") for pid in pids]}
            for i, pids in enumerate(alive)]  # fmt: skip


def test_the_earliest_of_the_cascade_is_named_with_the_time_it_went() -> None:
    # pid 3 dies first, the root then stops pid 2 and pid 4, then exits
    samples = _samples([[1, 2, 3, 4]] * 5 + [[1, 2, 4], [1, 2], [1]])
    death = first_death(samples, root_pid=1, reaped={})
    assert death is not None and death.pid == 3
    assert (death.last_seen_t, death.gone_by_t, death.before_root_s) == (4.0, 5.0, 2.0)
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
    assert death is not None and death.rank == 1 and death.exit == "killed by SIGKILL"
    assert death_sentence(death).startswith("first death: rank 1 pid 5 (trainer)")
    assert exit_text(3) == "exit code 3"


def test_processes_gone_in_the_same_interval_are_named_together() -> None:
    samples = _samples([[1, 2, 3, 4]] * 3 + [[1, 4], [1]])
    death = first_death(samples, 1, {})
    assert death is not None and death.pid == 2 and death.together == ("pid 3 (worker)",)
    assert (
        "first death: pid 2 (worker) (with pid 3 (worker) in the same interval) went between"
        in death_sentence(death)
    )


def test_the_kernels_exit_events_order_one_interval_and_give_the_status() -> None:
    # rank 1 exits 1 at t=3.2; the agent then stops rank 0 at t=3.6: both go between the samples at 3 and 4
    samples = [{"t": float(i), "processes": [_p(1, "other"), _p(5, "worker", rank=0), _p(6, "worker", rank=1)]}
               for i in range(4)]  # fmt: skip
    samples.append({"t": 4.0, "processes": [_p(1, "other")]})
    by_samples = first_death(samples, 1, {})
    assert by_samples is not None and by_samples.pid == 5  # without events: rank order, named together
    assert by_samples.together == ("rank 1 pid 6 (worker)",) and by_samples.then == ()
    exits = {5: (-signal.SIGTERM, 3.6), 6: (1, 3.2)}
    death = first_death(samples, 1, {}, exits=exits)
    assert death is not None and (death.pid, death.rank, death.exited_t) == (6, 1, 3.2)
    assert death.exit == "exit code 1" and death.together == ()
    assert death.interval_ranks == by_samples.interval_ranks == (0, 1)
    assert death_sentence(death) == (
        "first death: rank 1 pid 6 (worker) exited at t=3.2 s (the kernel's exit event), 0.8 s before the "
        "root's last sample; exit code 1; then rank 0 pid 5 (worker) at t=3.6 s"
    )


def test_an_exit_event_outside_the_interval_is_another_process_of_that_pid() -> None:
    samples = _samples([[1, 2, 3]] * 3 + [[1, 3], [1]])
    death = first_death(samples, 1, {}, exits={2: (0, 40.0), 3: (-signal.SIGKILL, 3.5)})
    assert death is not None and death.pid == 2 and death.exited_t is None
    assert death.exit == "exit status not observable (reaped by its own parent)"


def test_an_exit_is_a_process_own_only_between_its_last_sample_and_the_next() -> None:
    # pid 2 ran, went between t=2 and t=3, and its PID came back as another process seen from t=5
    samples = [{"t": float(i), "processes": [_p(1, "trainer"), _p(2)]} for i in range(3)]
    samples += [{"t": float(i), "processes": [_p(1, "trainer")]} for i in (3, 4)]
    samples += [
        {"t": float(i), "processes": [_p(1, "trainer"), {**_p(2), "start_ticks": 99}]} for i in (5, 6)
    ]
    assert process_exits(samples, {2: (0, 2.5)}) == {(2, 20): {"returncode": 0, "exited_t": 2.5}}
    # the newest exit of PID 2 is the later process's: after its last sample, so not the first one's
    assert process_exits(samples, {2: (-9, 6.2)}) == {(2, 99): {"returncode": -9, "exited_t": 6.2}}
    assert process_exits(samples, {2: (0, 1.5)}) == {}  # before its last sample: an earlier process's
    assert process_exits(samples, {2: (0, 4.5)}) == {}  # too long after the sample that missed it


def test_an_exit_read_just_after_the_roots_last_sample_is_not_a_negative_lead() -> None:
    samples = _samples([[1, 2]] * 3 + [[1]])  # pid 2 gone by t=3, the root's last sample
    death = first_death(samples, 1, {}, exits={2: (1, 3.4)})
    assert death is not None and death.exited_t == 3.4 and death.before_root_s == 0.0
