"""Fault: makes progress for DURATION s then exits with CODE."""

from __future__ import annotations

from _common import args, heartbeat_loop

log_dir, (duration, code) = args((1.5, 3.0))
heartbeat_loop(log_dir, duration, 0.05)
raise SystemExit(int(code))
