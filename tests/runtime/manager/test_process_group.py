"""The process group's bounds (real gloo ranks, no trainer): a collective whose peer never calls it ends at
training.collective_timeout_s as a CollectiveError instead of hanging, and leaving a group whose destroy
hangs returns at the deadline with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soakbench.runtime.manager import process_group

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.linux_only

RANK = """
import json, sys, time
import torch
from soakbench.runtime.distributed import RankIdentity
from soakbench.runtime.learners.collective import CollectiveError
from soakbench.runtime.manager.process_group import join_group
rank = int(sys.argv[1])
identity = RankIdentity(rank=rank, local_rank=rank, world_size=2, local_world_size=2, run_id=None, restart_count=0)
group = join_group(identity, "cpu", timeout_s=2.0)
if rank == 1:
    time.sleep(60)  # in the group, never in the collective
start = time.monotonic()
try:
    group.mean([torch.ones(4)])
    print(json.dumps({"error": None}))
except CollectiveError as exc:
    print(json.dumps({"error": str(exc), "after_s": time.monotonic() - start}), flush=True)
"""


@pytest.mark.slow
def test_a_collective_whose_peer_never_calls_it_ends_at_the_timeout() -> None:
    from torch.distributed.elastic.utils.distributed import get_free_port

    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(get_free_port()))
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(r)], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        for r in range(2)
    ]
    try:
        out, _ = ranks[0].communicate(timeout=60)
    finally:
        for proc in ranks:
            proc.kill()
            proc.wait()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["error"] is not None and "training.collective_timeout_s=2" in result["error"], result
    assert result["error"].startswith("all_reduce across 2 ranks failed")
    assert 1.5 <= result["after_s"] < 30.0  # the bound held: not at once, not never


def test_leaving_a_group_whose_destroy_hangs_returns_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_group.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(process_group.dist, "destroy_process_group", lambda: time.sleep(30))
    start = time.monotonic()
    assert process_group.leave_group(0.3) == "destroy_process_group did not return within 0.3 s"
    assert time.monotonic() - start < 5.0
