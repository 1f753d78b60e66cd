"""Fault: a child process grows its RSS by STEP_MIB every TICK s for as long as its parent lives.

The parent exits after DURATION s and the child follows within a tick (it watches its parent PID), so the
samples end on the leak rather than on a teardown, and nothing is left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    tick_s, step_mib = (float(v) for v in sys.argv[2:4])
    blob: list[bytearray] = []
    parent = os.getppid()
    while os.getppid() == parent:
        if len(blob) < 1000:
            blob.append(bytearray(int(step_mib) << 20))
        time.sleep(tick_s)
    sys.exit(0)  # the parent is gone; never fall through into the parent's code below

log_dir, (duration, tick_s, step_mib) = args((4.0, 0.1, 8.0))
child = subprocess.Popen([sys.executable, __file__, "--child", str(tick_s), str(step_mib)])
heartbeat_loop(log_dir, duration, 0.05)
os._exit(0)  # leave the child to notice; waiting for it would put its teardown into the samples
