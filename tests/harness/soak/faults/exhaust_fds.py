"""Opens pipes at a random pace (RATE fds/s on average, each tick's count drawn from a Poisson law) under a
soft RLIMIT_NOFILE it lowers itself to LIMIT, until the kernel refuses one (EMFILE); then writes the
wall time of that refusal to LOG_DIR/exhausted.json and exits 0. The calibration benchmark's real
exhaustion (benchmarks/survival_calibration.py)."""

from __future__ import annotations

import json
import os
import random
import resource
import time

from _common import args, poisson_count, progress

log_dir, (rate, limit, seed) = args((5.0, 256.0, 0.0))
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (int(limit), hard))
rng = random.Random(int(seed))
held: list[int] = []
tick_s, i = 0.1, 0
try:
    while True:
        count = poisson_count(rng, rate * tick_s)
        for _ in range(count):
            held.extend(os.pipe())
        progress(log_dir, i)
        i += 1
        time.sleep(tick_s)
except OSError:
    os.close(held.pop())  # the refusal left no fd to write the record with
    (log_dir / "exhausted.json").write_text(json.dumps({"wall": time.time(), "fds": len(held)}))
