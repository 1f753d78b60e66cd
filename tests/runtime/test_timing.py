"""PhaseTimer: one sample per timed section, by phase; ``take`` hands over and forgets what was recorded."""

from __future__ import annotations

import torch

from soakbench.runtime.timing import PhaseTimer, device_sync


def test_take_returns_the_sections_since_the_last_take() -> None:
    timer = PhaseTimer(torch.device("cpu"))
    with timer.phase("physics_exchange"):
        pass
    with timer.phase("backend_reset"):
        pass
    with timer.phase("backend_reset"):
        pass
    first = timer.take()
    assert {k: len(v) for k, v in first.items()} == {"physics_exchange": 1, "backend_reset": 2}
    assert all(ms >= 0.0 for samples in first.values() for ms in samples)
    assert timer.take() == {} and dict(timer.samples_ms) == {}
    with timer.phase("update_state"):
        pass
    assert list(timer.take()) == ["update_state"]


def test_host_devices_need_no_synchronization() -> None:
    sync = device_sync(torch.device("cpu"))
    assert sync() is None
