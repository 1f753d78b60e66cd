"""Fault: three worker children; only the one started with index LEAKER opens another pipe every TICK s.

Each worker follows its parent out within a tick, so the samples end on the leak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--worker":
    index, leaker, tick_s = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    held: list[tuple[int, int]] = []
    parent = os.getppid()
    while os.getppid() == parent:
        if index == leaker and len(held) < 400:
            held.append(os.pipe())
        time.sleep(tick_s)
    sys.exit(0)

log_dir, (duration, tick_s, leaker_index) = args((5.0, 0.1, 1.0))
workers = [
    subprocess.Popen([sys.executable, __file__, "--worker", str(i), str(int(leaker_index)), str(tick_s)])
    for i in range(3)
]
heartbeat_loop(log_dir, duration, 0.05)
os._exit(0)  # the workers notice their parent is gone; waiting would put their teardown in the samples
