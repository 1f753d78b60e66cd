"""A stand-in trainer whose throughput falls: each step sleeps longer than the last.

``python slowing_trainer.py LOG_DIR [DURATION_S] [SLOWDOWN]``: steps of ``NUM_ENVS`` env steps, the sleep
growing linearly from ``BASE_S`` to ``BASE_S * (1 + SLOWDOWN)`` over DURATION_S (SLOWDOWN 0 holds the
pace). Each progress record carries ``env_steps_per_s`` over the last step, as the trainer's do.
"""

from __future__ import annotations

import json
import time

from _common import args

NUM_ENVS = 64
BASE_S = 0.02

log_dir, (duration, slowdown) = args((6.0, 1.0))
start = time.monotonic()
steps = 0


def write(record: dict[str, object]) -> None:
    with open(log_dir / "progress.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"schema": 1, "time": time.time(), **record}) + "\n")


iteration = 0
while (elapsed := time.monotonic() - start) < duration:
    began = time.monotonic()
    time.sleep(BASE_S * (1.0 + slowdown * elapsed / duration))
    steps += NUM_ENVS
    iteration += 1
    rate = NUM_ENVS / (time.monotonic() - began)
    write({"elapsed_s": elapsed, "iteration": iteration, "total_env_steps": steps,
           "env_steps_per_s": round(rate, 3), "phase": "train"})  # fmt: skip
write({"elapsed_s": time.monotonic() - start, "iteration": iteration, "total_env_steps": steps,
       "env_steps_per_s": 0.0, "phase": "finalize", "final": True})  # fmt: skip
