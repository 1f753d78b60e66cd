"""A 2-rank gloo job for the rank tests (test double; run by torchrun: ``ranks_job.py LOG_DIR MODE``).

Each rank writes ``LOG_DIR/rank-<R>/progress.jsonl`` and all-reduces a small tensor every tick.
MODE ``stall``: rank 1 stops at tick 5 outside any collective while rank 0 waits in all_reduce.
MODE ``shutdown_hang``: both ranks write their final record after 10 ticks; rank 1 then never exits.
MODE ``short``: 10 ticks, a final record, a clean exit. MODE ``fail_once``: rank 1 exits 1 at tick 5 of
the first attempt (TORCHELASTIC_RESTART_COUNT 0); a restarted attempt runs as ``short``. MODE ``leak``:
60 ticks, rank 1 opening one more pipe every tick and holding it, then a final record and a clean exit.
Any other MODE (``run``): ticks until killed.
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


def join(rank: int) -> None:
    """The gloo group; a restarted attempt keys its rendezvous apart from the attempt before it, whose
    entries are still in the agent's store."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    timeout = timedelta(seconds=600)
    if attempt == "0":
        dist.init_process_group("gloo", timeout=timeout)
        return
    base = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout
    )
    store = dist.PrefixStore(f"attempt-{attempt}", base)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout
    )


def main() -> None:
    log_dir, mode = Path(sys.argv[1]), sys.argv[2]
    rank = int(os.environ["RANK"])
    if mode == "fail_once" and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        mode = "short"
    folder = log_dir / f"rank-{rank}"
    folder.mkdir(parents=True, exist_ok=True)
    join(rank)
    tensor = torch.ones(4)
    ticks = {"shutdown_hang": 10, "short": 10, "leak": 60}.get(mode, 10_000)
    first_attempt_fails = mode == "fail_once" and rank == 1
    held: list[tuple[int, int]] = []
    for tick in range(ticks):
        if mode == "leak" and rank == 1:
            held.append(os.pipe())
        if mode == "stall" and rank == 1 and tick == 5:
            stall_outside_collective()
        if first_attempt_fails and tick == 5:
            sys.exit(1)
        dist.all_reduce(tensor)
        progress(folder, tick)
        time.sleep(0.2)
    progress(folder, ticks, final=True)
    if mode == "shutdown_hang" and rank == 1:
        stall_outside_collective()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
