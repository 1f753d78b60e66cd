"""Cross-process wake-up signals: Linux eventfd, with a portable pipe fallback.

A :class:`WakeSignal` is a counting doorbell, not a data channel: the sender rings it after changing
shared state, the receiver blocks on it with a timeout, drains it, and then re-reads the shared state.
Because the doorbell counter survives until drained, a ring that happens between the receiver's state
check and its wait is never lost. Nobody spins: every wait is a ``poll`` with a timeout.

Signals pickle across a ``spawn`` process start by duplicating their file descriptors into the child
(``multiprocessing.reduction.DupFd``); pickling them at any other time is an error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
from typing import Any, Literal

SignalKind = Literal["eventfd", "pipe"]


def default_kind() -> SignalKind:
    """``eventfd`` where the OS provides it (Linux, Python >= 3.10), else ``pipe``."""
    return "eventfd" if hasattr(os, "eventfd") and sys.platform.startswith("linux") else "pipe"


class WakeSignal:
    """One-direction doorbell between two processes.

    ``kind="eventfd"`` uses one non-blocking eventfd (read and write side share the fd);
    ``kind="pipe"`` uses a non-blocking ``os.pipe`` pair. ``set()`` never blocks: a full pipe already
    means "rung".
    """

    def __init__(self, kind: SignalKind | None = None) -> None:
        self.kind: SignalKind = kind or default_kind()
        self._closed = False
        if self.kind == "eventfd":
            if not hasattr(os, "eventfd"):
                raise RuntimeError("eventfd signalling requested but os.eventfd is unavailable here")
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._rfd, self._wfd = fd, fd
        elif self.kind == "pipe":
            self._rfd, self._wfd = os.pipe()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self._wfd, False)
        else:
            raise ValueError(f"signal kind must be 'eventfd' or 'pipe', got {kind!r}")

    # -- pickling for spawn ---------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        from multiprocessing import reduction

        if self._closed:
            raise RuntimeError("cannot send a closed WakeSignal to another process")
        state: dict[str, Any] = {"kind": self.kind, "r": reduction.DupFd(self._rfd)}
        if self.kind == "pipe":
            state["w"] = reduction.DupFd(self._wfd)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.kind = state["kind"]
        self._closed = False
        self._rfd = state["r"].detach()
        self._wfd = state["w"].detach() if self.kind == "pipe" else self._rfd

    # -- operations -----------------------------------------------------------------------------
    @property
    def fds(self) -> tuple[int, ...]:
        """The distinct file descriptors held (for fd accounting in tests)."""
        return (self._rfd,) if self._rfd == self._wfd else (self._rfd, self._wfd)

    @property
    def closed(self) -> bool:
        return self._closed

    def set(self) -> None:
        """Ring the doorbell (never blocks; ringing a closed signal is a no-op)."""
        if self._closed:
            return
        try:
            if self.kind == "eventfd":
                os.eventfd_write(self._wfd, 1)
            else:
                os.write(self._wfd, b"\x01")
        except BlockingIOError:
            pass  # counter/pipe already full: the receiver will wake anyway
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.EBADF):
                raise

    def wait(self, timeout_s: float) -> bool:
        """Block until rung or ``timeout_s`` seconds pass; drain; return whether it was rung."""
        if self._closed:
            return False
        poller = select.poll()
        poller.register(self._rfd, select.POLLIN)
        try:
            events = poller.poll(max(0.0, timeout_s) * 1e3)
        except InterruptedError:
            events = []  # a signal handler ran: let the caller re-check its state
        if not events:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        """Reset the doorbell without blocking."""
        if self._closed:
            return
        try:
            if self.kind == "eventfd":
                os.eventfd_read(self._rfd)
            else:
                while os.read(self._rfd, 4096):
                    pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        """Close every fd held; idempotent."""
        if self._closed:
            return
        self._closed = True
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
