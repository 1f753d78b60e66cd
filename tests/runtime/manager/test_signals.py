"""WakeSignal: eventfd and pipe doorbells, within a process and across a spawn."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from soakbench.runtime.manager.signals import WakeSignal, default_kind

KINDS = ["pipe"] + (["eventfd"] if default_kind() == "eventfd" else [])


@pytest.mark.parametrize("kind", KINDS)
def test_set_wait_drain(kind: str) -> None:
    sig = WakeSignal(kind)  # type: ignore[arg-type]  # parametrized with SignalKind strings
    try:
        assert sig.wait(0.01) is False
        sig.set()
        sig.set()
        assert sig.wait(0.01) is True
        assert sig.wait(0.01) is False  # drained: two rings coalesce into one wake
    finally:
        sig.close()


@pytest.mark.parametrize("kind", KINDS)
def test_close_is_idempotent_and_releases_fds(kind: str) -> None:
    sig = WakeSignal(kind)  # type: ignore[arg-type]  # parametrized with SignalKind strings
    fds = sig.fds
    sig.close()
    sig.close()
    sig.set()  # no-op after close
    assert sig.wait(0.0) is False
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def _ring_back(ping: WakeSignal, pong: WakeSignal) -> None:
    if ping.wait(10.0):
        pong.set()


@pytest.mark.parametrize("kind", KINDS)
def test_signal_crosses_spawn(kind: str) -> None:
    ctx = mp.get_context("spawn")
    ping, pong = WakeSignal(kind), WakeSignal(kind)  # type: ignore[arg-type]  # parametrized with SignalKind strings
    try:
        proc = ctx.Process(target=_ring_back, args=(ping, pong))
        proc.start()
        ping.set()
        assert pong.wait(30.0) is True
        proc.join(10)
        assert proc.exitcode == 0
    finally:
        ping.close()
        pong.close()


def test_unknown_kind_rejected() -> None:
    with pytest.raises(ValueError, match="eventfd' or 'pipe"):
        WakeSignal("futex")  # type: ignore[arg-type]  # an unsupported kind on purpose
