"""One rank of tests/runtime/learners/test_data_parallel.py: joins a real gloo group, takes one update
on its share of a fixed batch, and saves the state it ends with.

Usage: python data_parallel_rank.py ALGO RANK WORLD OUT (MASTER_ADDR/MASTER_PORT in the environment).
"""

from __future__ import annotations

import sys

import torch
from conftest import ACT, OBS, algo_cfg, toy_batch

from soakbench.runtime.distributed import RankIdentity
from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.base import state_to_dict
from soakbench.runtime.learners.flashsac import flashsac_step
from soakbench.runtime.learners.replay import Batch
from soakbench.runtime.learners.sac import sac_step
from soakbench.runtime.manager.process_group import join_group, leave_group

ROWS = 64  # per rank


def shard(batch: Batch, rank: int) -> Batch:
    rows = slice(rank * ROWS, (rank + 1) * ROWS)
    return Batch(
        *(t[rows] for t in (batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated))
    )


def main(algo: str, rank: int, world: int, out: str) -> None:
    identity = RankIdentity(
        rank=rank, local_rank=rank, world_size=world, local_world_size=world, run_id=None, restart_count=0
    )
    group = join_group(identity, "cpu", timeout_s=60.0)
    # A different seed per rank: join() must hand every rank rank 0's networks.
    learner = build_learner(algo_cfg(algo), OBS, ACT, torch.device("cpu"), seed=100 + rank)
    learner.join(group)
    joined = learner.checksum()
    noise = torch.randn(ROWS * world, ACT, generator=torch.Generator().manual_seed(5))
    mine = noise[rank * ROWS : (rank + 1) * ROWS]
    step = sac_step if algo == "sac" else flashsac_step
    learner.state, _ = step(
        learner.nets, learner.hp, learner.state, shard(toy_batch(ROWS * world), rank), mine, 0.5 * mine
    )
    mine_only = toy_batch(ROWS, seed=10 + rank)  # data only this rank sees: its statistics differ
    learner.add_transitions(
        mine_only.obs, mine_only.action, mine_only.reward, mine_only.next_obs, mine_only.terminated
    )
    learner.synchronize()
    torch.save({"joined": joined, "checksum": learner.checksum(), "state": state_to_dict(learner.state)}, out)
    leave_group(10.0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
