"""Rank scaling: the trainer at 1 and 2 ranks with the same total worlds, and the all-reduce's share of
an update. Every figure is a ratio of two measurements taken in this run, on this host.

Trainer: ``train`` with E worlds in one process, and ``torchrun --nproc-per-node 2`` with E/2 worlds per
rank, the same iterations, alternated ``--repeats`` times. Reported: the job's env steps/s (the ranks'
sum), learner updates/s per rank, and the 2-rank ÷ 1-rank ratios.

Collective: two gloo processes (NCCL with ``--device cuda``, one GPU per rank) each time the learner's
update step at its owner sizes, and the gradient all-reduce of that step alone (the critic's gradients,
then the actor's with the temperature's, as ``sac_step`` makes them). Reported: ms per update, all-reduce
ms per update, and the all-reduce's share. Then the critic's forward, backward and gradient average, once
with the runtime's explicit all-reduce and once under DDP (``ddp_over_explicit``): the choice between the
two, measured.

    uv run --frozen python benchmarks/rank_scaling.py --num-envs 64 --iterations 60
    uv run --frozen python benchmarks/rank_scaling.py --skip-trainer --algo flashsac --task g1_motion_tracking
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from torch import nn

    from soakbench.runtime.learners.replay import Batch
    from soakbench.runtime.manager.process_group import ProcessGroupCollective

REPO = Path(__file__).resolve().parents[1]


# -- trainer: 1 rank x E worlds against 2 ranks x E/2 worlds --------------------------------------------
def trainer_run(
    algo: str, task: str, worlds: int, ranks: int, iterations: int, overrides: list[str]
) -> dict[str, Any]:
    """One real run; the job's env steps/s (sum over ranks) and updates/s per rank, from the summaries."""
    with tempfile.TemporaryDirectory(prefix="rank-scaling-") as tmp:
        return _trainer_run(Path(tmp) / "run", algo, task, worlds, ranks, iterations, overrides)


def _trainer_run(  # noqa: PLR0913 — one run's inputs
    log_dir: Path, algo: str, task: str, worlds: int, ranks: int, iterations: int, overrides: list[str]
) -> dict[str, Any]:
    launcher = [sys.executable]
    if ranks > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]
    cmd = [
        *launcher, "-m", "soakbench.runtime.cli", "--algo", algo, "--task", task, "--sim", "mujoco",
        f"log_dir={log_dir}", f"algo.num_envs={worlds}", f"algo.max_iterations={iterations}",
        "training.no_play=true", *overrides,
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"rank_scaling: the {ranks}-rank trainer exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    folders = [log_dir] if ranks == 1 else [log_dir / f"rank-{r}" for r in range(ranks)]
    summaries = [json.loads((f / "run_summary.json").read_text()) for f in folders]
    return {
        "ranks": ranks,
        "worlds_per_rank": worlds,
        "env_steps_per_s": sum(s["env_steps_per_s"] for s in summaries),
        "updates_per_s_per_rank": statistics.fmean(s["learner_updates_per_s"] for s in summaries),
    }


def trainer_figures(
    algo: str, task: str, worlds: int, iterations: int, repeats: int, overrides: list[str]
) -> dict[str, Any]:
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(repeats):  # alternated, so a change in the host's speed touches both alike
        runs[1].append(trainer_run(algo, task, worlds, 1, iterations, overrides))
        runs[2].append(trainer_run(algo, task, worlds // 2, 2, iterations, overrides))
    median = {n: {k: statistics.median(r[k] for r in rs) for k in ("env_steps_per_s", "updates_per_s_per_rank")}
              for n, rs in runs.items()}  # fmt: skip
    return {
        "runs": runs,
        "median": median,
        "env_steps_ratio_2_over_1": median[2]["env_steps_per_s"] / median[1]["env_steps_per_s"],
        "updates_per_rank_ratio_2_over_1": median[2]["updates_per_s_per_rank"]
        / median[1]["updates_per_s_per_rank"],
    }


# -- collective: one update step against its gradient all-reduce ----------------------------------------
def collective_rank(algo: str, task: str, rank: int, device: str, updates: int, out: str) -> None:
    """One rank of the collective measurement (run as a subprocess with MASTER_ADDR/PORT set)."""
    import torch

    from soakbench.runtime.config import compose
    from soakbench.runtime.distributed import RankIdentity
    from soakbench.runtime.env import make_env
    from soakbench.runtime.learners import build_learner
    from soakbench.runtime.learners.collective import ALPHA_GRAD
    from soakbench.runtime.learners.replay import Batch
    from soakbench.runtime.manager.process_group import join_group, leave_group

    identity = RankIdentity(
        rank=rank, local_rank=rank, world_size=2, local_world_size=2, run_id=None, restart_count=0
    )
    torch.set_num_threads(1)
    group = join_group(identity, device, timeout_s=120.0)
    composed = compose(algo, task, "mujoco", ["algo.num_envs=1"])
    env = make_env(composed)  # the task's dimensions only
    obs_dim, act_dim, rows = env.obs_dim, env.action_dim, composed.algo.batch_size
    env.close()
    cfg = composed.algo
    learner = build_learner(cfg, obs_dim, act_dim, torch.device(device), seed=rank)
    learner.join(group)
    gen = torch.Generator(device=device).manual_seed(rank)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device)

    batch = Batch(
        rand(rows, obs_dim),
        rand(rows, act_dim).tanh(),
        rand(rows),
        rand(rows, obs_dim),
        torch.zeros(rows, device=device),
    )
    critic = {k: torch.randn_like(v) for k, v in learner.state.critic.items()}
    actor = {k: torch.randn_like(v) for k, v in learner.state.actor.items()} | {
        ALPHA_GRAD: torch.zeros((), device=device)
    }

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(fn: Any) -> list[float]:
        fn()  # warm-up
        out: list[float] = []
        for _ in range(updates):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            out.append(time.perf_counter() - start)
        return out

    step = learner._update_once
    update_s = timed(lambda: step(batch))
    reduce_s = timed(lambda: (group.mean(list(critic.values())), group.mean(list(actor.values()))))
    explicit, ddp = critic_backward_steps(learner.nets.critic, group, batch, algo)
    Path(out).write_text(
        json.dumps(
            {
                "update_ms": 1e3 * statistics.median(update_s),
                "all_reduce_ms": 1e3 * statistics.median(reduce_s),
                "critic_explicit_ms": 1e3 * statistics.median(timed(explicit)),
                "critic_ddp_ms": 1e3 * statistics.median(timed(ddp)),
            }
        )
    )
    leave_group(10.0)


def critic_backward_steps(
    module: nn.Module, group: ProcessGroupCollective, batch: Batch, algo: str
) -> tuple[Callable[[], None], Callable[[], None]]:
    """The critic's forward, backward and gradient average two ways, on the same module and batch: the
    runtime's one all-reduce after ``backward`` (``ProcessGroupCollective.mean``), and DDP, whose bucket
    reductions overlap ``backward``. DDP needs ``module.backward()`` on its own parameters, which the pure
    update steps do not use; this measures what that restructuring would buy."""
    import copy

    from torch.nn.parallel import DistributedDataParallel

    extra = (True, None) if algo == "flashsac" else ()
    plain, wrapped = copy.deepcopy(module), DistributedDataParallel(copy.deepcopy(module))

    def explicit() -> None:
        plain.zero_grad(set_to_none=True)
        plain(batch.obs, batch.action, *extra).pow(2).mean().backward()
        group.mean([p.grad for p in plain.parameters() if p.grad is not None])

    def ddp() -> None:
        wrapped.zero_grad(set_to_none=True)
        wrapped(batch.obs, batch.action, *extra).pow(2).mean().backward()

    return explicit, ddp


def collective_figures(algo: str, task: str, device: str, updates: int) -> dict[str, Any]:
    from torch.distributed.elastic.utils.distributed import get_free_port

    port = get_free_port()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with tempfile.TemporaryDirectory(prefix="rank-scaling-") as tmp:
        outs = [str(Path(tmp) / f"rank{r}.json") for r in range(2)]
        # each rank sees only its own GPU, as runtime.cli gives a CUDA rank (runtime.distributed)
        procs = [
            subprocess.Popen([sys.executable, __file__, "--collective-rank", str(r), "--algo", algo, "--task", task,
                              "--device", device, "--timed-updates", str(updates), "--out", outs[r]],
                             env=env | ({"CUDA_VISIBLE_DEVICES": _device_of(r)} if device == "cuda" else {}), cwd=REPO)
            for r in range(2)
        ]  # fmt: skip
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("rank_scaling: a collective rank failed (its error is above)")
        ranks = [json.loads(Path(o).read_text()) for o in outs]
    update = statistics.fmean(r["update_ms"] for r in ranks)
    reduce = statistics.fmean(r["all_reduce_ms"] for r in ranks)
    explicit = statistics.fmean(r["critic_explicit_ms"] for r in ranks)
    ddp = statistics.fmean(r["critic_ddp_ms"] for r in ranks)
    return {
        "backend": "nccl" if device == "cuda" else "gloo",
        "update_ms": update,
        "all_reduce_ms": reduce,
        "all_reduce_share": reduce / update,
        "critic_step_explicit_ms": explicit,
        "critic_step_ddp_ms": ddp,
        "ddp_over_explicit": ddp / explicit,
    }


def _device_of(rank: int) -> str:
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[rank] if visible else str(rank)


def main(  # noqa: PLR0913 — one parameter per command-line option (typer)
    algo: Annotated[str, typer.Option()] = "sac",
    task: Annotated[str, typer.Option()] = "g1_walk_flat",
    num_envs: Annotated[int, typer.Option(min=2, help="total worlds: E for 1 rank, E/2 per rank for 2")] = 64,
    iterations: Annotated[int, typer.Option(min=1)] = 60,
    repeats: Annotated[int, typer.Option(min=1, help="alternated trainer runs of each size")] = 2,
    timed_updates: Annotated[int, typer.Option(min=1, help="timed update steps per rank")] = 20,
    override: Annotated[list[str] | None, typer.Option(help="dotted.key=value for every trainer run")] = None,
    device: Annotated[str, typer.Option(help="cpu (gloo) or cuda (NCCL, one GPU per rank)")] = "cpu",
    skip_trainer: Annotated[bool, typer.Option()] = False,
    collective_rank_: Annotated[int | None, typer.Option("--collective-rank", hidden=True)] = None,
    out: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Print the rank-scaling figures as JSON (every ratio measured in this run)."""
    if (collective_rank_ is None) != (out is None):
        raise typer.BadParameter("--collective-rank and --out go together (they run one rank)")
    if collective_rank_ is not None and out is not None:
        collective_rank(algo, task, collective_rank_, device, timed_updates, out)
        return
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device {device!r}: must be cpu or cuda")
    if num_envs % 2:
        raise typer.BadParameter(f"--num-envs {num_envs}: must be even (E/2 worlds per rank at 2 ranks)")
    report: dict[str, Any] = {
        "host_cpus": os.cpu_count(),
        "algo": algo,
        "task": task,
        "total_worlds": num_envs,
    }
    report["collective"] = collective_figures(algo, task, device, timed_updates)
    if not skip_trainer:
        report["trainer"] = trainer_figures(algo, task, num_envs, iterations, repeats, list(override or []))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    typer.run(main)
