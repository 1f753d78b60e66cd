"""ReplayIngress counters and invariants: publish/release, backpressure, stop and close paths."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Iterator

import pytest
import torch

from soakbench.runtime.manager.ingress import (
    IngressBatch,
    IngressLayout,
    IngressSpec,
    ReplayIngress,
    ReplayStats,
)
from soakbench.runtime.manager.shm import list_segments
from soakbench.runtime.manager.signals import WakeSignal

OD, AD, R = 3, 2, 4


def _rows(seed: float, device: str = "cpu") -> IngressBatch:
    obs = torch.full((R, OD), seed)
    act = torch.full((R, AD), -seed)
    rew = torch.arange(R, dtype=torch.float32) + seed
    nxt = obs + 1
    term = torch.tensor([True, False, True, False])
    return IngressBatch(*(t.to(device) for t in (obs, act, rew, nxt, term)))


@pytest.fixture
def ingress() -> Iterator[ReplayIngress]:
    to_l, to_c = WakeSignal(), WakeSignal()
    ing = ReplayIngress.create(
        IngressLayout(depth=2, slot_rows=R, obs_dim=OD, action_dim=AD), "cpu", to_l, to_c
    )
    yield ing
    ing.close()
    to_l.close()
    to_c.close()


def test_roundtrip_and_counters(ingress: ReplayIngress) -> None:
    assert ingress.peek(0.0) is None
    assert ingress.put(_rows(1.0))
    assert ingress.put(_rows(2.0))
    assert ingress.stats()["high_water_occupancy"] == 2
    batch = ingress.peek(0.0)
    assert batch is not None
    torch.testing.assert_close(batch.obs, torch.full((R, OD), 1.0))
    torch.testing.assert_close(batch.action, torch.full((R, AD), -1.0))
    torch.testing.assert_close(batch.reward, torch.arange(R, dtype=torch.float32) + 1.0)
    torch.testing.assert_close(batch.next_obs, torch.full((R, OD), 2.0))
    assert batch.terminated.tolist() == [True, False, True, False]
    ingress.release()
    batch = ingress.peek(0.0)
    assert batch is not None and float(batch.obs[0, 0]) == 2.0
    ingress.release()
    stats = ingress.stats()
    assert stats["published_sequence"] == stats["release_sequence"] == 2
    assert stats["final_occupancy"] == 0
    assert stats["early_returns"] == stats["dropped_batches"] == 0
    with pytest.raises(RuntimeError, match="without a published slot"):
        ingress.release()


def test_backpressure_waits_for_release(ingress: ReplayIngress) -> None:
    ingress.put(_rows(1.0))
    ingress.put(_rows(2.0))

    def consume_later() -> None:
        time.sleep(0.2)
        ingress.release()

    t = threading.Thread(target=consume_later)
    t.start()
    assert ingress.put(_rows(3.0), poll_s=0.05)
    t.join()
    stats = ingress.stats()
    assert stats["backpressure_waits"] == 1
    assert stats["backpressure_wait_s"] > 0.0
    assert stats["high_water_occupancy"] == 2  # never exceeds depth
    assert stats["published_sequence"] == 3


@pytest.mark.parametrize("path", ["stop", "close"])
def test_early_return_while_full(ingress: ReplayIngress, path: str) -> None:
    ingress.put(_rows(1.0))
    ingress.put(_rows(2.0))
    timer = threading.Timer(0.1, ingress.request_stop if path == "stop" else ingress.mark_closed)
    timer.start()
    assert ingress.put(_rows(3.0), poll_s=0.05) is False
    timer.join()
    s = ingress.stats()
    assert s["early_returns"] == s["dropped_batches"] == 1
    assert s["closed_returns"] + s["stop_returns"] == s["early_returns"]
    assert s["stop_returns" if path == "stop" else "closed_returns"] == 1
    assert s["published_sequence"] == 2  # the dropped batch was never published


def test_abort_callback_is_a_stop_return(ingress: ReplayIngress) -> None:
    ingress.put(_rows(1.0))
    ingress.put(_rows(2.0))
    assert ingress.put(_rows(3.0), poll_s=0.01, abort=lambda: True) is False
    assert ingress.stats()["stop_returns"] == 1


def test_put_after_close_is_early_return(ingress: ReplayIngress) -> None:
    ingress.mark_closed()
    assert ingress.put(_rows(1.0)) is False
    assert ingress.stats()["closed_returns"] == 1


def test_closed_is_this_ends_mapping_not_the_shared_flag() -> None:
    to_l, to_c = WakeSignal(), WakeSignal()
    ing = ReplayIngress.create(
        IngressLayout(depth=1, slot_rows=R, obs_dim=OD, action_dim=AD), "cpu", to_l, to_c
    )
    ing.mark_closed()  # the consumer is gone for the producer ...
    assert ing.halted() and not ing.closed  # ... but this end can still be read
    assert set(ing.stats()) == set(ReplayStats.__annotations__)
    ing.close()
    assert ing.closed
    to_l.close()
    to_c.close()


def test_layout_validation() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1"):
        IngressLayout(depth=0, slot_rows=1, obs_dim=1, action_dim=1)


def _producer(spec: IngressSpec, to_l: WakeSignal, to_c: WakeSignal, n: int) -> None:
    ing = ReplayIngress.attach(spec, to_l, to_c)
    try:
        for i in range(n):
            if not ing.put(_rows(float(i)), poll_s=0.05):
                break
    finally:
        ing.close()


def _consume(
    ing: ReplayIngress, n: int, timeout_s: float, delay_s: float = 0.0, on_cuda: bool = False
) -> list[float]:
    """Peek and release up to ``n`` slots; returns each slot's first obs value (the producer's index)."""
    seen: list[float] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < n and time.monotonic() < deadline:
        batch = ing.peek(0.5)
        if batch is None:
            continue
        assert batch.obs.is_cuda == on_cuda
        seen.append(float(batch.obs[0, 0]))
        time.sleep(delay_s)
        ing.release()
    return seen


def test_cross_process_producer_consumer_and_no_residue() -> None:
    to_l, to_c = WakeSignal(), WakeSignal()
    ing = ReplayIngress.create(
        IngressLayout(depth=2, slot_rows=R, obs_dim=OD, action_dim=AD), "cpu", to_l, to_c
    )
    n = 40
    proc = mp.get_context("spawn").Process(target=_producer, args=(ing.spec, to_l, to_c, n))
    proc.start()
    seen = _consume(ing, n, timeout_s=60, delay_s=0.002)  # a slower consumer forces backpressure
    proc.join(30)
    stats = ing.stats()
    ing.close()
    to_l.close()
    to_c.close()
    assert proc.exitcode == 0
    assert seen == [float(i) for i in range(n)]  # FIFO, nothing lost or duplicated
    assert stats["published_sequence"] == stats["release_sequence"] == n
    assert 1 <= stats["high_water_occupancy"] <= 2
    assert list_segments(f"soakbench_{os.getpid()}_") == []  # ours only: others run in parallel


def _cuda_producer(spec: IngressSpec, to_l: WakeSignal, to_c: WakeSignal, n: int) -> None:
    ing = ReplayIngress.attach(spec, to_l, to_c)
    try:
        for i in range(n):
            if not ing.put(_rows(float(i), "cuda"), poll_s=0.05):
                break
    finally:
        ing.close()


@pytest.mark.cuda
def test_cuda_ipc_ingress_stays_on_device() -> None:
    to_l, to_c = WakeSignal(), WakeSignal()
    ing = ReplayIngress.create(
        IngressLayout(depth=2, slot_rows=R, obs_dim=OD, action_dim=AD), "cuda", to_l, to_c
    )
    assert ing.data.segment is None and ing.data.tensor.is_cuda  # CUDA IPC, no host segment
    n = 20
    proc = mp.get_context("spawn").Process(target=_cuda_producer, args=(ing.spec, to_l, to_c, n))
    proc.start()
    seen = _consume(ing, n, timeout_s=120, on_cuda=True)
    proc.join(60)
    stats = ing.stats()
    ing.close()
    to_l.close()
    to_c.close()
    assert proc.exitcode == 0
    assert seen == [float(i) for i in range(n)]
    assert stats["published_sequence"] == stats["release_sequence"] == n
