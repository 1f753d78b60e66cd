"""InferenceRing: versioned publication, lag/queue counters, seqlock consume."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest
import torch

from soakbench.runtime.manager.ring import InferenceRing, RingSpec, RingStats
from soakbench.runtime.manager.shm import list_segments
from soakbench.runtime.manager.signals import WakeSignal


@pytest.mark.parametrize("capacity", [1, 3])
def test_publish_consume_counters(capacity: int) -> None:
    bell = WakeSignal()
    ring = InferenceRing.create(capacity, 5, "cpu", bell)
    try:
        out = torch.zeros(5)
        assert ring.consume_latest(out) is None
        for v in range(1, 5):
            assert ring.publish(torch.full((5,), float(v))) == v
        s = ring.stats()
        assert s["publication_lag"] == 4
        assert s["queue_depth"] == min(4, capacity)
        assert s["max_publication_lag"] == 4
        assert s["max_in_flight"] == min(4, capacity)
        assert s["events"] == 4
        assert bell.wait(0.0)
        assert ring.consume_latest(out) == 4  # only the newest is adopted
        torch.testing.assert_close(out, torch.full((5,), 4.0))
        s = ring.stats()
        assert s["queue_depth"] == s["publication_lag"] == 0
        assert ring.consume_latest(out) is None
    finally:
        ring.close()
        bell.close()


def test_closed_is_public_and_stats_are_typed() -> None:
    bell = WakeSignal()
    ring = InferenceRing.create(2, 3, "cpu", bell)
    assert not ring.closed
    assert set(ring.stats()) == set(RingStats.__annotations__)
    ring.close()
    assert ring.closed
    ring.close()  # idempotent
    bell.close()


def test_wrong_shape_and_capacity_rejected() -> None:
    bell = WakeSignal()
    with pytest.raises(ValueError, match="inference_slot_capacity"):
        InferenceRing.create(0, 5, "cpu", bell)
    ring = InferenceRing.create(1, 5, "cpu", bell)
    try:
        with pytest.raises(ValueError, match="ring expects"):
            ring.publish(torch.zeros(4))
    finally:
        ring.close()
        bell.close()


def _consumer(spec: RingSpec, bell: WakeSignal, done: WakeSignal, target: int) -> None:
    ring = InferenceRing.attach(spec, bell)
    out = torch.zeros(spec.state_size)
    try:
        last = 0
        while last < target:
            bell.wait(1.0)
            v = ring.consume_latest(out)
            if v is not None:
                assert v > last
                assert bool((out == float(v)).all()), "torn read adopted"
                last = v
    finally:
        ring.close()
        done.set()


def test_cross_process_consumer_never_sees_torn_state() -> None:
    bell, done = WakeSignal(), WakeSignal()
    size = 50_000
    ring = InferenceRing.create(1, size, "cpu", bell)
    proc = mp.get_context("spawn").Process(target=_consumer, args=(ring.spec, bell, done, 200))
    proc.start()
    for v in range(1, 201):
        ring.publish(torch.full((size,), float(v)))
    assert done.wait(60.0)
    proc.join(10)
    assert proc.exitcode == 0
    assert ring.stats()["publication_lag"] == 0
    ring.close()
    bell.close()
    done.close()
    assert list_segments(f"soakbench_{os.getpid()}_") == []  # ours only: others run in parallel
