"""The learning benchmark's smoke: `benchmarks/learning_parity.py` on a short CPU SAC g1_walk_flat recipe
must produce a policy that clearly outlives the uniform-random policy, so a change that stops learning
fails the slow lane. Its 2-rank twin trains the same job env steps with half the worlds on each of two
torchrun ranks and must pass the same floor.

Measure (the benchmark's checkpoint evaluation, runtime/learners/evaluation.py): survival length = steps
until the first fall of each of 32 worlds, censored at 300 control steps (6 s), same seed and initial
states for every policy. The best deterministic survival of the last checkpoints (96 k, 112 k, 128 k env
steps, and final.pt at 128 k) must reach MIN_RATIO x the uniform-random policy (the trainer's own
prefill policy). The untrained actor's near-zero actions hold the stand pose and survive the whole
horizon, which is why the baseline is uniform-random actions, not the fresh actor.

Budget (calibrated on the shared 2-core host, learner_threads=1 by the config rule): 32 envs x 4 000
iterations = 128 000 env steps, 4 updates/iteration (~15 800 updates), ~200 s of trainer wall time
plus ~40 s of evaluation. Calibration (same training overrides, `scripts/learners/evaluate_run.py --all`),
deterministic survival at 96 k / 112 k / 128 k env steps vs uniform random 61.9:
seed 0 run A 251.3 / 220.0 / 236.7, seed 1 213.9 / 227.4 / 167.2, seed 2 254.8 / 223.4 / 232.6.
Why the best of the last ones and not the final checkpoint alone: the asynchronous trainer makes runs of
one seed differ and the policy oscillates between checkpoints (seed 1 fell from 169.7 at 64 k to 69.7 at
80 k, then rose to 213.9); final checkpoints measured 236.7, 259.6, 167.2, 232.6 and once 92.7 (1.5x,
seed 0, a clean-tree evidence run), which failed a final-only 2x assertion. The best of the last three
was >= 227 in every calibrated run, so MIN_RATIO = 2 (>= 124 steps) keeps a wide margin while still
failing a learner that does not learn (random: 61.9; untrained, stochastic: ~60).
The overrides (higher learning rates, tau 0.02, init_alpha 0.01, 4 updates per iteration) size SAC for
this short budget; the owner's recipe is the 10.26M env-step one in docs/learners.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.runtime.learners.evaluation import evaluate_run

# The two smokes share one xdist worker, one after the other: each was calibrated with the other core
# mostly free, and two trainers of 2 and 4 processes on 2 cores would only slow both.
pytestmark = pytest.mark.xdist_group("learning-smokes")

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_parity.py"
NUM_ENVS = 32
PREFILL = 60
ENV_STEPS = 128_000  # 4 000 iterations
HORIZON = 300
MIN_RATIO = 2.0
EVALUATED = ("trained_deterministic", "uniform_random")  # what the floor reads, as the benchmark does
RECIPE = (
    f"algo.prefill_iterations={PREFILL}", f"algo.learning_starts={NUM_ENVS * PREFILL}",
    "algo.updates_per_iteration=4", "algo.actor_lr=0.001", "algo.critic_lr=0.001", "algo.tau=0.02",
    "algo.init_alpha=0.01", "algo.save_interval=500", "training.no_play=true",
    "training.collector_metrics_interval=20", "training.physics_threads=1",
)  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train")
def test_the_benchmark_smoke_outlives_random_actions_by_its_calibrated_floor(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    cmd = [
        sys.executable, str(BENCHMARK), "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        "--num-envs", str(NUM_ENVS), "--env-steps", str(ENV_STEPS), "--seeds", "0", "--target", "250",
        *(arg for item in RECIPE for arg in ("--set", item)),
        "--evaluate-envs", str(NUM_ENVS), "--evaluate-horizon", str(HORIZON), "--evaluate-last", "4",
        "--out", str(out), "--runs-dir", str(tmp_path / "runs"),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stderr[-3000:]
    (seed,) = json.loads(out.read_text())["seeds"]
    assert seed["summary"]["env_steps"] == ENV_STEPS
    checkpoints = seed["checkpoints"]
    # the last 4 distinct policies: ckpt_00004000.pt is final.pt's policy, so it is not evaluated again
    assert [c["env_steps"] for c in checkpoints] == [80_000, 96_000, 112_000, 128_000]
    assert checkpoints[-1]["checkpoint"] == "final.pt"
    print(f"survival over {HORIZON} steps, {NUM_ENVS} worlds: {checkpoints}; summary {seed['summary']}")
    random_len = checkpoints[-1]["uniform_random_mean"]
    assert random_len < 0.5 * HORIZON  # the baseline falls well inside the horizon
    best = max(c["trained_deterministic_mean"] for c in checkpoints)
    assert best >= MIN_RATIO * random_len, checkpoints


# Two ranks x 16 worlds, the same 128 000 job env steps (4 000 iterations x 16 worlds x 2 ranks). Each rank
# makes 2 updates per iteration, so the job draws as many replay rows per env step as the 1-rank smoke
# (2 ranks x 2 updates x 256 rows vs 4 x 256 per 32 env steps), in half the optimizer steps, each on the
# gradient averaged over both ranks (512 rows). At 4 updates per rank the 2 learners sharing 2 cores took
# twice the wall time for no gain the floor could see. Calibration (one run, seed 0, rank 0's checkpoints
# at 80 k / 96 k / 112 k / 128 k job env steps): deterministic survival 159.6 / 213.2 / 291.2 / 223.3 vs
# uniform random 61.9, in 383 s of trainer wall time on the shared 2-core host.
RANKS, WORLDS_PER_RANK, ITERATIONS = 2, NUM_ENVS // 2, ENV_STEPS // NUM_ENVS
RANK_RECIPE = (
    *(item for item in RECIPE if not item.startswith(("algo.learning_starts", "algo.updates_per_iteration"))),
    f"algo.learning_starts={WORLDS_PER_RANK * PREFILL}",
    "algo.updates_per_iteration=2",
)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train", ranks=2)
def test_two_ranks_with_half_the_worlds_each_learn_past_the_same_floor(tmp_path: Path) -> None:
    job = tmp_path / "job"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(RANKS),
        "-m", "soakbench.runtime.cli", "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        f"log_dir={job}", "seed=0", f"algo.num_envs={WORLDS_PER_RANK}", f"algo.max_iterations={ITERATIONS}",
        *RANK_RECIPE,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_PORT")}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1000)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((job / "run_summary.json").read_text())
    assert summary["distributed"]["params_identical"] is True
    assert sum(r["total_env_steps"] for r in summary["distributed"]["ranks"]) == ENV_STEPS
    survival = {
        name: evaluate_run(
            job / "rank-0", num_envs=NUM_ENVS, horizon=HORIZON, checkpoint=name, policies=EVALUATED
        )
        for name in ("ckpt_00002500.pt", "ckpt_00003000.pt", "ckpt_00003500.pt", "final.pt")
    }
    print({name: r["trained_deterministic"]["mean"] for name, r in survival.items()})
    random_len = survival["final.pt"]["uniform_random"]["mean"]
    assert random_len < 0.5 * HORIZON
    best = max(r["trained_deterministic"]["mean"] for r in survival.values())
    assert best >= MIN_RATIO * random_len, survival
