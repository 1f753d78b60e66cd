"""Writes CHUNK MiB into WATCHED (a checkpoint folder) every tick for DURATION s and never deletes a
file, then exits 0: the bytes on disk grow without bound."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from _common import args, heartbeat_loop

watched = Path(sys.argv.pop(2))
log_dir, (duration, chunk_mib) = args((4.0, 1.0))
watched.mkdir(parents=True, exist_ok=True)
data = os.urandom(int(chunk_mib * (1 << 20)))


def tick(i: int) -> None:
    with open(watched / f"ckpt-{i:05d}.bin", "wb") as fh:
        fh.write(data)


heartbeat_loop(log_dir, duration, 0.1, tick)
