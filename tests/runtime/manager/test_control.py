"""The control segment and the arenas: public ``closed`` and ``stats()``, nothing left behind."""

from __future__ import annotations

import os

import pytest

from soakbench.runtime.manager.control import ControlSegment, ControlStats, StepTiming
from soakbench.runtime.manager.ingress import ReplayStats, empty_replay_stats
from soakbench.runtime.manager.plan import RunPlan
from soakbench.runtime.manager.resources import Arenas, ArenaStats, Doorbells, Hello
from soakbench.runtime.manager.ring import RingStats, empty_ring_stats
from soakbench.runtime.manager.shm import list_segments

OURS = f"soakbench_{os.getpid()}_"  # other test processes run in parallel


def test_control_segment_is_shared_and_reports_its_stats() -> None:
    trainer = ControlSegment.create()
    collector = ControlSegment.attach(trainer.spec)
    try:
        collector.record_episodes(2, 3.5, 14.0)
        collector.record_step(1, StepTiming(inference_s=0.25, env_step_s=0.5, publish_s=0.125))
        collector.record_actor_version(4)
        assert not collector.finish_requested()
        trainer.request_finish()
        assert collector.finish_requested()
        stats = trainer.stats()
        assert set(stats) == set(ControlStats.__annotations__)
        assert stats == {
            "finish": 1,
            "iterations": 1,
            "episodes": 2,
            "actor_version": 4,
            "episode_return_sum": 3.5,
            "episode_length_sum": 14.0,
            "env_step_s": 0.5,
            "inference_s": 0.25,
            "publish_s": 0.125,
        }
        assert not trainer.closed
    finally:
        collector.close()
        trainer.close()
    assert trainer.closed and collector.closed
    trainer.close()  # idempotent
    assert list_segments(OURS) == []


def test_empty_stats_have_every_key_of_the_live_ones() -> None:
    replay = empty_replay_stats(depth=3, slot_rows=4)
    ring = empty_ring_stats(capacity=2)
    assert set(replay) == set(ReplayStats.__annotations__)
    assert set(ring) == set(RingStats.__annotations__)
    assert (replay["depth"], replay["slot_rows"], ring["slot_capacity"]) == (3, 4, 2)
    assert all(v == 0 for k, v in replay.items() if k not in ("depth", "slot_rows"))


@pytest.fixture
def plan() -> RunPlan:
    return RunPlan(
        num_envs=4,
        slot_rows=2,
        total_iterations=1,
        prefill=0,
        ingress_depth=2,
        ring_capacity=1,
        metrics_interval=1,
        save_interval=1,
        heartbeat_s=1.0,
        fault_at=None,
        learner_device="cpu",
        physics_device="cpu",
        sim_backend="mujoco",
        sharing_configured=None,
        sharing_resolved=None,
    )


def test_arenas_stats_live_then_none_once_closed(plan: RunPlan) -> None:
    hello = Hello(3, 2, "fake", None, "cpu", 7, {})
    bells = Doorbells.create()
    arenas = Arenas.create(plan, hello, bells)
    try:
        stats = arenas.stats()
        assert stats is not None and stats.control is not None
        assert stats.replay["depth"] == 2 and stats.replay["slot_rows"] == 2
        assert stats.inference["slot_capacity"] == 1
        message = arenas.attach_message(plan)
        assert message["kind"] == "attach" and message["total_iterations"] == 1
    finally:
        arenas.ingress.close()
    assert arenas.ingress.closed and not arenas.ring.closed
    assert arenas.stats() is None  # a half-closed set reports nothing rather than a partial snapshot
    arenas.ring.close()
    arenas.control.close()
    bells.to_learner.close()
    bells.to_collector.close()
    assert list_segments(OURS) == []
    assert ArenaStats.empty(plan).control is None


def test_failed_arena_creation_leaves_no_segment(plan: RunPlan) -> None:
    hello = Hello(3, 2, "fake", None, "cpu", 0, {})  # an actor state of size 0 cannot be published
    bells = Doorbells.create()
    try:
        with pytest.raises(ValueError, match="actor state size"):
            Arenas.create(plan, hello, bells)
    finally:
        bells.to_learner.close()
        bells.to_collector.close()
    assert list_segments(OURS) == []  # the ingress created before the ring was unlinked again
