"""Data-parallel learners over a real gloo process group (two processes): every rank starts from rank
0's networks and ends each update with the same state; for SAC, two ranks on two halves of a batch
make exactly the update one process makes on the whole batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.distributed.elastic.utils.distributed import get_free_port

from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.base import state_checksum
from soakbench.runtime.learners.sac import SACLearner, sac_step

from .conftest import ACT, OBS, algo_cfg, toy_batch

# a real two-process gloo group: not the inner-loop lane
pytestmark = pytest.mark.slow

RANK_SCRIPT = Path(__file__).with_name("data_parallel_rank.py")
ROWS = 64


def _run_ranks(algo: str, tmp_path: Path, world: int = 2) -> list[dict[str, Any]]:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(get_free_port()), OMP_NUM_THREADS="1")
    outs = [tmp_path / f"rank{r}.pt" for r in range(world)]
    procs = [
        subprocess.Popen([sys.executable, str(RANK_SCRIPT), algo, str(r), str(world), str(outs[r])], env=env)
        for r in range(world)
    ]
    codes = [p.wait(timeout=180) for p in procs]
    assert codes == [0] * world
    return [torch.load(out, weights_only=False) for out in outs]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_ranks_start_from_rank_0_and_end_each_update_identical(algo: str, tmp_path: Path) -> None:
    ranks = _run_ranks(algo, tmp_path)
    rank0 = build_learner(algo_cfg(algo), OBS, ACT, torch.device("cpu"), seed=100)
    assert ranks[0]["joined"] == ranks[1]["joined"] == state_checksum(rank0.state)
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    assert state_checksum(ranks[0]["state"]) == ranks[0]["checksum"]


def test_two_sac_ranks_on_two_halves_make_the_whole_batch_update(tmp_path: Path) -> None:
    ranks = _run_ranks("sac", tmp_path)
    learner = build_learner(algo_cfg("sac"), OBS, ACT, torch.device("cpu"), seed=100)
    assert isinstance(learner, SACLearner)
    noise = torch.randn(2 * ROWS, ACT, generator=torch.Generator().manual_seed(5))
    whole, _ = sac_step(learner.nets, learner.hp, learner.state, toy_batch(2 * ROWS), noise, 0.5 * noise)
    split = ranks[0]["state"]
    for field in ("critic", "target_critic", "actor"):
        for name, value in getattr(whole, field).items():
            torch.testing.assert_close(split[field][name], value, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(split["log_alpha"], whole.log_alpha)
    assert split["step"] == whole.step == 1
