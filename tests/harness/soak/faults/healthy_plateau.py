"""Healthy: RSS, eventfds and children climb to a plateau in the first fifth of DURATION, then hold.

With SOAKBENCH_TEST_LEAK_EVENTFD=1 in the environment (the command stays the same, so `soak compare`
sees one workload) it also leaks one eventfd per tick after the plateau.
"""

from __future__ import annotations

import os
import subprocess
import sys

from _common import args, heartbeat_loop

leak = os.environ.get("SOAKBENCH_TEST_LEAK_EVENTFD") == "1"

log_dir, (duration,) = args((4.0,))
ramp_ticks = max(1, int(duration * 0.2 / 0.05))
held: list[int] = []
blob: list[bytearray] = []
children = [
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({duration})"]) for _ in range(2)
]


def tick(i: int) -> None:
    if i < ramp_ticks:
        blob.append(bytearray((150 << 20) // ramp_ticks))  # fills to ~150 MiB like a replay buffer
        held.append(os.eventfd(0))
    elif leak:
        held.append(os.eventfd(0))


heartbeat_loop(log_dir, duration, 0.05, tick)
for child in children:
    child.wait()
