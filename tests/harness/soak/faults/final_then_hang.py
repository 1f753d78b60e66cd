"""Fault: makes progress for WORK s, writes its final progress record (``final: true``), then never
exits and never touches the log dir again: it sleeps in ``linger_after_final``. Past the stale window
the stale-progress rule would fire; after a final record only the shutdown timeout may (shutdown_hang)."""

from __future__ import annotations

import json
import time

from _common import args, heartbeat_loop


def linger_after_final() -> None:
    while True:
        time.sleep(0.05)


log_dir, (work_s,) = args((1.0,))
ticks = heartbeat_loop(log_dir, work_s, 0.05)
with open(log_dir / "progress.jsonl", "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"schema": 1, "time": time.time(), "iteration": ticks, "final": True}) + "\n")
linger_after_final()
