"""A 2-rank gloo job for the rank tests (test double; run by torchrun: ``ranks_job.py LOG_DIR MODE``).

Each rank writes ``LOG_DIR/rank-<R>/progress.jsonl`` and all-reduces a small tensor every tick.
MODE ``stall``: rank 1 stops at tick 5 outside any collective while rank 0 waits in all_reduce.
MODE ``shutdown_hang``: both ranks write their final record after 10 ticks; rank 1 then never exits.
MODE ``short``: 10 ticks, a final record, a clean exit. Any other MODE (``run``): ticks until killed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist


def stall_outside_collective() -> None:
    while True:
        time.sleep(1.0)


def progress(folder: Path, tick: int, final: bool = False) -> None:
    record = {"schema": 1, "time": time.time(), "iteration": tick, **({"final": True} if final else {})}
    with open(folder / "progress.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def main() -> None:
    log_dir, mode = Path(sys.argv[1]), sys.argv[2]
    rank = int(os.environ["RANK"])
    folder = log_dir / f"rank-{rank}"
    folder.mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=600))
    tensor = torch.ones(4)
    ticks = 10 if mode in ("shutdown_hang", "short") else 10_000
    for tick in range(ticks):
        if mode == "stall" and rank == 1 and tick == 5:
            stall_outside_collective()
        dist.all_reduce(tensor)
        progress(folder, tick)
        time.sleep(0.2)
    progress(folder, ticks, final=True)
    if mode == "shutdown_hang" and rank == 1:
        stall_outside_collective()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
