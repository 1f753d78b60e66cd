"""Writes files of random size (RATE MiB/s on average) into FOLDER until the file system is full (ENOSPC),
then writes the wall time of that refusal to LOG_DIR/exhausted.json and exits 0. The calibration
benchmark's real disk exhaustion, into a small tmpfs (benchmarks/survival_calibration.py)."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

from _common import args, progress

folder = Path(sys.argv.pop(2))
log_dir, (rate_mib, seed) = args((2.0, 0.0))
rng = random.Random(int(seed))
tick_s, i = 0.1, 0
try:
    while True:
        size = int(rng.expovariate(1.0 / (rate_mib * tick_s)) * (1 << 20))
        with open(folder / f"chunk-{i:06d}.bin", "wb") as fh:
            fh.write(os.urandom(size))
        progress(log_dir, i)
        i += 1
        time.sleep(tick_s)
except OSError:
    (log_dir / "exhausted.json").write_text(json.dumps({"wall": time.time()}))
