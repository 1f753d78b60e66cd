"""Fault: double-forks a setsid daemon that outlives the command (should be a residual process)."""

from __future__ import annotations

import os
import time

from _common import args, heartbeat_loop

log_dir, (duration, daemon_s) = args((2.0, 300.0))
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    time.sleep(daemon_s)
    os._exit(0)
os.waitpid(pid, 0)
heartbeat_loop(log_dir, duration, 0.05)
