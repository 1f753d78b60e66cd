"""Fault-free tree for the memory measures: two processes map one 256 MiB shared segment.

The parent fills an anonymous shared mapping, forks, and the child reads every page of it, so both hold
all of the segment resident: summed RSS counts it twice, summed PSS once. Both run DURATION s; the child
follows its parent out within a tick.
"""

from __future__ import annotations

import mmap
import os
import time

from _common import args, heartbeat_loop, progress

SIZE = 256 << 20
PAGE = mmap.PAGESIZE

log_dir, (duration,) = args((4.0,))
segment = mmap.mmap(-1, SIZE, flags=mmap.MAP_SHARED)
chunk = b"\x5a" * (16 << 20)
for _ in range(SIZE // len(chunk)):  # every page resident in the shared object; progress meanwhile
    segment.write(chunk)
    progress(log_dir, -1)
child = os.fork()
if child == 0:
    touched = 0
    for offset in range(0, SIZE, PAGE):  # fault every page in here too
        touched += segment[offset]
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.05)
    os._exit(0 if touched else 1)
heartbeat_loop(log_dir, duration, 0.05)
os._exit(0)  # the child notices its parent is gone; waiting for it would deadlock
