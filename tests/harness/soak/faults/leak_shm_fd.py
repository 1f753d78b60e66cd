"""Fault: opens one more /dev/shm segment fd every TICK s (unlinked at exit, so only the fd trend fails)."""

from __future__ import annotations

import os

from _common import args, heartbeat_loop

log_dir, (duration, tick_s) = args((4.0, 0.15))
names: list[str] = []


def tick(i: int) -> None:
    name = f"/dev/shm/soakfault_{os.getpid()}_{i}"
    fd = os.open(name, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    names.append(name)  # fd deliberately kept open: the leak


heartbeat_loop(log_dir, duration, tick_s, tick)
for name in names:
    os.unlink(name)
