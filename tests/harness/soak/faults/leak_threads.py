"""Fault: starts one more thread every TICK s; each waits forever on an event that is never set."""

from __future__ import annotations

import os
import threading

from _common import args, heartbeat_loop

log_dir, (duration, tick_s) = args((4.0, 0.1))
never = threading.Event()
started: list[threading.Thread] = []


def spawn(_: int) -> None:
    thread = threading.Thread(target=never.wait, daemon=True)
    thread.start()
    started.append(thread)


heartbeat_loop(log_dir, duration, tick_s, spawn)
os._exit(0)  # daemon threads blocked in wait: skip the interpreter's shutdown of them
