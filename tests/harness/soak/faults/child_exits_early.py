"""Fault: a child opens one eventfd every TICK s for GROW s and exits; its parent lives LINGER s longer.

The child's exit drops the tree's fd total inside the last quarter of the trend window, so the tree
verdict reads "growth stopped"; only the child's own series shows the leak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    grow_s, tick_s = float(sys.argv[2]), float(sys.argv[3])
    held: list[int] = []
    end = time.monotonic() + grow_s
    while time.monotonic() < end:
        held.append(os.eventfd(0))
        time.sleep(tick_s)
    sys.exit(0)

log_dir, (grow_s, linger_s, tick_s) = args((8.0, 1.5, 0.05))
child = subprocess.Popen([sys.executable, __file__, "--child", str(grow_s), str(tick_s)])
heartbeat_loop(log_dir, grow_s + linger_s, 0.05)
sys.exit(child.wait())
