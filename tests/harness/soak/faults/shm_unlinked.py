"""Fault: a /dev/shm segment whose fd is closed without an unlink.

MODE ``held``: kept open for HOLD s (seen by samples) then closed; ``flash``: created and closed at once,
between two samples (only the before/after snapshot can see it).
"""

from __future__ import annotations

import os
import sys
import time

from _common import args, heartbeat_loop

mode = sys.argv[2] if len(sys.argv) > 2 else "held"
sys.argv[2:3] = []
log_dir, (duration, hold_s) = args((2.0, 0.8))
fd = os.open(f"/dev/shm/soakfault_{os.getpid()}_{mode}", os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 8192)
if mode == "held":
    time.sleep(hold_s)
os.close(fd)  # closed, never unlinked: the leak
heartbeat_loop(log_dir, duration, 0.05)
