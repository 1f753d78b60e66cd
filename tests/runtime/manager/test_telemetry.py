"""Telemetry window marks, the learner counters' snapshot and the heartbeat, without a session."""

from __future__ import annotations

import threading

import pytest

from soakbench.runtime.manager.heartbeat import Heartbeat
from soakbench.runtime.manager.telemetry import CounterSnapshot, EpisodeTotals, LearnerCounters, Telemetry


def test_progress_rate_is_per_window() -> None:
    t = Telemetry(started_mono=100.0, tb_min_interval_s=1.0)
    assert t.progress_rate(0, now=100.0) == 0.0  # no previous record yet
    assert t.progress_rate(80, now=102.0) == 40.0
    assert t.progress_rate(80, now=102.0) == 0.0  # no time passed: no rate, not a division by zero
    assert t.progress_rate(100, now=103.0) == 20.0


def test_tb_windows_are_rate_limited_unless_forced() -> None:
    t = Telemetry(started_mono=100.0, tb_min_interval_s=1.0)
    first = t.tb_window(CounterSnapshot(2, 16, 4, 0.5), EpisodeTotals(2, 3.0, 14.0), now=102.0)
    assert first is not None
    assert (first.seconds, first.learner_updates, first.env_steps, first.learner_wait_s) == (2.0, 4, 16, 0.5)
    assert first.episodes == EpisodeTotals(2, 3.0, 14.0)
    assert t.tb_window(CounterSnapshot(3, 24, 6, 0.5), EpisodeTotals(3, 4.0, 21.0), now=102.5) is None
    forced = t.tb_window(CounterSnapshot(3, 24, 6, 0.75), EpisodeTotals(3, 4.0, 21.0), now=102.5, force=True)
    assert forced is not None
    assert (forced.seconds, forced.learner_updates, forced.env_steps) == (0.5, 2, 8)
    assert forced.learner_wait_s == pytest.approx(0.25)
    assert forced.episodes == EpisodeTotals(1, 1.0, 7.0)  # only the episodes since the previous window


def test_tb_window_without_a_control_segment_keeps_the_episode_mark() -> None:
    t = Telemetry(started_mono=0.0, tb_min_interval_s=0.0)
    window = t.tb_window(CounterSnapshot(1, 8, 0, 0.0), None, now=1.0)
    assert window is not None and window.episodes is None
    later = t.tb_window(CounterSnapshot(2, 16, 0, 0.0), EpisodeTotals(5, 5.0, 35.0), now=2.0)
    assert later is not None and later.episodes == EpisodeTotals(5, 5.0, 35.0)


def test_counter_snapshot_counts_whole_vector_steps() -> None:
    c = LearnerCounters(iterations=3, slots=6, learner_updates=2, learner_wait_s=0.25)
    assert c.snapshot(num_envs=8) == CounterSnapshot(3, 24, 2, 0.25)


def test_heartbeat_beats_in_the_background_and_stops() -> None:
    beats = threading.Semaphore(0)
    heartbeat = Heartbeat(0.05, beats.release)
    heartbeat.start()
    assert beats.acquire(timeout=5.0) and beats.acquire(timeout=5.0)  # the thread keeps beating
    heartbeat.stop()
    heartbeat.beat()  # a stopped heartbeat never writes again
    while beats.acquire(blocking=False):
        pass
    heartbeat.beat()
    assert not beats.acquire(timeout=0.2)
    assert heartbeat.errors == []


def test_a_failing_background_beat_is_recorded_not_raised() -> None:
    def broken() -> None:
        raise OSError("disk full")

    heartbeat = Heartbeat(0.01, broken)
    heartbeat.start()
    for _ in range(500):
        if heartbeat.errors:
            break
        threading.Event().wait(0.01)
    heartbeat.stop()
    assert heartbeat.errors == ["heartbeat: OSError: disk full"]
