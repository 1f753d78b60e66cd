"""Healthy tree for the overhead benchmark: the parent plus CHILDREN light workers for DURATION s, each
worker holding WORKER_MIB MiB of touched private memory (so its smaps_rollup read has pages to walk)."""

from __future__ import annotations

import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--worker":
    end = time.monotonic() + float(sys.argv[2])
    held = bytearray(int(float(sys.argv[3])) << 20)
    held[::4096] = b"x" * len(held[::4096])  # touch every page: resident, not just reserved
    while time.monotonic() < end:
        sum(range(2000))  # a little work, mostly asleep
        time.sleep(0.05)
    raise SystemExit(0)

log_dir, (duration, children, worker_mib) = args((30.0, 9.0, 0.0))
workers = [
    subprocess.Popen([sys.executable, __file__, "--worker", str(duration), str(worker_mib)])
    for _ in range(int(children))
]
heartbeat_loop(log_dir, duration, 0.5)
raise SystemExit(max(w.wait() for w in workers))
