"""harness.soak.verdicts.looks: the look schedule of --until-decided, the error each look spends, and a
replay that takes the same looks as the monitor did."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from soakbench.harness.soak.verdicts.looks import (
    FIRST_LOOK_SAMPLES,
    TOTAL_ALPHA,
    LookClock,
    MonitorStop,
    SurvivalInputs,
    first_look_s,
    look,
    look_alpha,
    look_span_s,
    replay,
)


def _samples(fds: list[int], *, step_s: float = 1.0, finalize_at: int | None = None) -> list[dict[str, Any]]:
    out = []
    for i, count in enumerate(fds):
        progress: dict[str, Any] = {"iteration": i}
        if finalize_at is not None and i >= finalize_at:
            progress["phase"] = "finalize"
        # no host limit is needed: each sampled process carries its own soft RLIMIT_NOFILE (fd_limit)
        process = {"pid": 10, "start_ticks": 1, "role": "trainer", "fds": {"total": count}, "fd_limit": 1024}
        out.append(
            {"t": i * step_s, "processes": [process], "totals": {"fd_total": count}, "progress": progress}
        )
    return out


def test_the_shares_of_every_look_sum_to_the_total_error_however_many_looks() -> None:
    assert look_alpha(1) == pytest.approx(TOTAL_ALPHA / 2)
    assert sum(look_alpha(k) for k in range(1, 10_001)) == pytest.approx(TOTAL_ALPHA * (1 - 1 / 10_001))
    assert all(look_alpha(k + 1) < look_alpha(k) for k in range(1, 50))
    with pytest.raises(ValueError, match="look index"):
        look_alpha(0)


def test_looks_come_at_doubling_spans_from_a_number_of_sample_intervals() -> None:
    first = first_look_s(5.0)
    assert first == FIRST_LOOK_SAMPLES * 5.0
    assert [look_span_s(k, first) for k in (1, 2, 3)] == [first, 2 * first, 4 * first]
    # a 72 h soak at 5 s samples looks a dozen times: few enough that each keeps a usable share
    assert math.floor(math.log2(72 * 3600 / first)) + 1 == 12


def test_the_clock_names_each_look_once_and_none_after_the_finalize_phase() -> None:
    clock = LookClock(10.0, t_start=5.0)
    due = [clock.due(s) for s in _samples(list(range(60)), finalize_at=50)]
    looked = {index: t for t, indices in enumerate(due) for index in indices}
    assert looked == {1: 15, 2: 25, 3: 45}  # spans 10, 20, 40 s after t_start; 80 s falls in finalize
    assert clock.closed
    with pytest.raises(ValueError, match="first look"):
        LookClock(0.0, t_start=0.0)


def test_a_steep_leak_is_decided_at_the_first_look_and_a_replay_finds_the_same_look() -> None:
    samples = _samples([20 + 8 * i for i in range(100)])
    inputs = SurvivalInputs(limits=None, target_s=3600.0, warmup_s=0.0)
    verdict = replay(samples, window=(0.0, 90.0), first_s=24.0, inputs=inputs)
    assert verdict.verdict == "fails" and verdict.looks is not None
    assert verdict.looks["count"] == 1 and verdict.looks["t"] == 24.0 and verdict.looks["decided"] is True
    assert verdict.confidence == pytest.approx(1 - TOTAL_ALPHA / 2)
    again = look(samples[:25], t_start=0.0, t_end=24.0, index=1, inputs=inputs)  # as the monitor looked
    assert [c.to_json() for c in again.classes] == [c.to_json() for c in verdict.classes]


def test_an_undecided_run_is_judged_once_more_at_its_end_as_the_next_look() -> None:
    rng = np.random.default_rng(3)
    samples = _samples([int(v) for v in 200 + rng.integers(-2, 3, size=120)])
    inputs = SurvivalInputs(limits=None, target_s=72 * 3600.0, warmup_s=0.0)
    verdict = replay(samples, window=(0.0, 110.0), first_s=24.0, inputs=inputs)
    assert verdict.verdict == "inconclusive"
    assert verdict.looks is not None and verdict.looks["final"] is True and verdict.looks["decided"] is False
    assert verdict.looks["count"] == 4  # looks at 24, 48 and 96 s, then the last one at 110 s
    assert verdict.confidence == pytest.approx(1 - look_alpha(4))


def test_each_look_is_stricter_than_a_soak_judged_once() -> None:
    """The later the look, the wider its bound: a growth a single end-of-run look calls fails may stay
    inconclusive at the tenth look."""
    samples = _samples([20 + i // 4 for i in range(400)])
    inputs = SurvivalInputs(limits=None, target_s=48 * 3600.0, warmup_s=0.0)
    once = look(samples, t_start=0.0, t_end=399.0, index=1, inputs=inputs)
    late = look(samples, t_start=0.0, t_end=399.0, index=10, inputs=inputs)
    [early_fd] = [c for c in once.classes if c.resource_class == "fds"]
    [late_fd] = [c for c in late.classes if c.resource_class == "fds"]
    assert early_fd.bound is not None and late_fd.bound is not None
    assert late_fd.bound.upper_per_hour > early_fd.bound.upper_per_hour
    assert late_fd.bound.lower_per_hour < early_fd.bound.lower_per_hour


def test_a_stop_round_trips_through_the_artifact() -> None:
    stop = MonitorStop("survival_decided", 12.5, "fails")
    assert MonitorStop.from_json(stop.to_json()) == stop
    assert MonitorStop.from_json(None) is None
