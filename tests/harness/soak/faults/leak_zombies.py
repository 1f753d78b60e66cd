"""Forks a child every tick that exits at once and is never waited for: defunct processes pile up for
DURATION s, then the program exits 0 (its zombies go with it)."""

from __future__ import annotations

import os

from _common import args, heartbeat_loop

log_dir, (duration,) = args((4.0,))


def tick(i: int) -> None:
    if os.fork() == 0:
        os._exit(0)


heartbeat_loop(log_dir, duration, 0.1, tick)
