"""Fault: makes progress for WORK s, then hangs without touching the log dir."""

from __future__ import annotations

import time

from _common import args, heartbeat_loop

log_dir, (work_s, hang_s) = args((1.0, 600.0))
heartbeat_loop(log_dir, work_s, 0.05)
time.sleep(hang_s)
