"""Healthy: fds, eventfds and RSS rise and fall in a sawtooth for DURATION s, then exit 0."""

from __future__ import annotations

import os

from _common import args, heartbeat_loop

log_dir, (duration,) = args((4.0,))
held: list[int] = []
blob: list[bytearray] = []


def tick(i: int) -> None:
    if i % 6 == 0:
        for fd in held:
            os.close(fd)
        held.clear()
        blob.clear()
    else:
        held.append(os.eventfd(0))
        r, w = os.pipe()
        held.extend((r, w))
        blob.append(bytearray(4 << 20))  # 4 MiB, touched by bytearray's zero fill


heartbeat_loop(log_dir, duration, 0.05, tick)
