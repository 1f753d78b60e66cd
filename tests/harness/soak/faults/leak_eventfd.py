"""Fault: creates one more eventfd every TICK s and never closes it."""

from __future__ import annotations

import os

from _common import args, heartbeat_loop

log_dir, (duration, tick_s) = args((4.0, 0.15))
leaked: list[int] = []
heartbeat_loop(log_dir, duration, tick_s, lambda i: leaked.append(os.eventfd(0)))
