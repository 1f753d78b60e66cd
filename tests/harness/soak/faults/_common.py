"""Shared bits of the fault programs (test doubles; run as scripts: ``python <file> LOG_DIR [args]``)."""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path


def args(defaults: tuple[float, ...] = (4.0,)) -> tuple[Path, list[float]]:
    """LOG_DIR then numeric arguments (duration seconds first), with defaults."""
    log_dir = Path(sys.argv[1])
    values = [float(v) for v in sys.argv[2:]]
    values += list(defaults[len(values) :])
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir, values


def progress(log_dir: Path, iteration: int) -> None:
    """Append one progress.jsonl record (the liveness signal the monitor watches)."""
    record = {"schema": 1, "time": time.time(), "iteration": iteration, "pid": os.getpid()}
    with open(log_dir / "progress.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def poisson_count(rng: random.Random, lam: float) -> int:
    """A Poisson draw of mean ``lam`` by inversion (``random`` has no Poisson draw)."""
    count, u = 0, rng.random()
    term = math.exp(-lam)
    p = term
    while u > p:
        count += 1
        term *= lam / count
        p += term
    return count


def heartbeat_loop(
    log_dir: Path, duration_s: float, tick_s: float, on_tick: Callable[[int], object] | None = None
) -> int:
    """Write progress every ``tick_s`` for ``duration_s``, calling ``on_tick(i)`` each tick; returns ticks."""
    end = time.monotonic() + duration_s
    i = 0
    while time.monotonic() < end:
        if on_tick is not None:
            on_tick(i)
        progress(log_dir, i)
        i += 1
        time.sleep(tick_s)
    return i
