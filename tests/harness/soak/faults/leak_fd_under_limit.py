"""Leaks PIPES pipes (two fds each) every tick under a soft RLIMIT_NOFILE it lowers itself to LIMIT,
for DURATION s, then exits 0 (before the limit is reached: the projection must see it coming). PIPES 0
holds its fds steady under the same limit."""

from __future__ import annotations

import os
import resource

from _common import args, heartbeat_loop

log_dir, (duration, limit, pipes) = args((5.0, 160.0, 1.0))
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (int(limit), hard))
held: list[int] = []


def tick(i: int) -> None:
    for _ in range(int(pipes)):
        held.extend(os.pipe())


heartbeat_loop(log_dir, duration, 0.1, tick)
