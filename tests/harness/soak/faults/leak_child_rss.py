"""Fault: a child process grows its RSS by STEP_MIB every TICK s for DURATION s."""

from __future__ import annotations

import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    duration, tick_s, step_mib = (float(v) for v in sys.argv[2:5])
    blob: list[bytearray] = []
    end = time.monotonic() + duration
    while time.monotonic() < end:
        blob.append(bytearray(int(step_mib) << 20))
        time.sleep(tick_s)
    raise SystemExit(0)

log_dir, (duration, tick_s, step_mib) = args((4.0, 0.1, 8.0))
child = subprocess.Popen([sys.executable, __file__, "--child", str(duration), str(tick_s), str(step_mib)])
heartbeat_loop(log_dir, duration, 0.05)
raise SystemExit(child.wait())
