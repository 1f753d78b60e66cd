"""Allocates and touches memory at a random pace (RATE MiB/s on average, each tick's MiB drawn from a
Poisson law) until the kernel stops it: the memory cgroup's OOM killer (SIGKILL: its last progress record
is the time of death, within one tick) or a refused allocation (MemoryError: the wall time is written to
LOG_DIR/exhausted.json). The calibration benchmark's real memory exhaustion
(benchmarks/survival_calibration.py, which runs the monitor and this program in a memory cgroup)."""

from __future__ import annotations

import json
import random
import time

from _common import args, poisson_count, progress

MIB = 1 << 20
PAGE = 4096

log_dir, (rate, seed) = args((4.0, 0.0))
rng = random.Random(int(seed))
held: list[bytearray] = []
tick_s, i = 0.1, 0
try:
    while True:
        count = poisson_count(rng, rate * tick_s)
        for _ in range(count):
            block = bytearray(MIB)
            block[::PAGE] = b"\x01" * (MIB // PAGE)  # touch every page: resident, not just reserved
            held.append(block)
        progress(log_dir, i)
        i += 1
        time.sleep(tick_s)
except MemoryError:
    (log_dir / "exhausted.json").write_text(json.dumps({"wall": time.time(), "mib": len(held)}))
