"""Learner throughput: full SAC and FlashSAC trainers at 64 and 256 envs on this host's CPUs.

For every (learner, num_envs) cell it runs the real trainer (``run_training``: collector process,
shared-memory ingress, inference ring) and reads the figures from the run's own artifacts:

- env steps/s and learner updates/s (``run_summary.json``),
- the share of the learner loop spent waiting on the replay ingress (manifest ``replay_ingress``),
- the collector's backpressure wait (s) — the other side of the same coupling.

It also times the learner alone (``Learner.update`` on a filled replay, same config, same process) so
each trainer figure has an in-run reference: ``update_share`` = trainer updates/s / isolated updates/s.
Ratios, not absolute numbers, are what transfer between hosts (this machine is shared and noisy).

    uv run --frozen python benchmarks/learner_throughput.py --iterations 150 --json
    uv run --frozen python benchmarks/learner_throughput.py --learners sac --envs 64 --iterations 300
    uv run --frozen python benchmarks/learner_throughput.py --learner-threads 2  # before/after: torch default on 2 cores

The learner's torch threads come from ``training.learner_threads`` (the trainer applies
``resolved.learner_threads``); ``--learner-threads 0`` keeps the config rule (null).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from soakbench.runtime.config import ComposedConfig

# CPU-sized learner settings (the owner defaults target a GPU: FlashSAC batch 2048, width 256 x 4).
CPU_OVERRIDES: dict[str, list[str]] = {
    "sac": ["algo.batch_size=256", "algo.learning_starts=1024"],
    "flashsac": [
        "algo.batch_size=512",
        "algo.learning_starts=1024",
        "algo.critic_hidden_dim=128",
        "algo.actor_hidden_dim=64",
    ],
}


def isolated_updates_per_s(cfg: ComposedConfig, obs_dim: int, action_dim: int, updates: int = 20) -> float:
    """Updates/s of the configured learner alone on a replay filled with random rows (CPU)."""
    import torch

    from soakbench.runtime.learners import build_learner

    learner = build_learner(cfg.algo, obs_dim, action_dim, torch.device("cpu"))
    n = max(cfg.algo.batch_size, cfg.algo.learning_starts)
    learner.add_transitions(
        torch.randn(n, obs_dim),
        torch.rand(n, action_dim) * 2 - 1,
        torch.randn(n),
        torch.randn(n, obs_dim),
        torch.rand(n) < 0.02,
    )
    learner.update()  # warm-up
    start = time.perf_counter()
    for _ in range(updates):
        learner.update()
    return updates * learner.updates_per_iteration / (time.perf_counter() - start)


def trainer_cell(
    algo: str, task: str, num_envs: int, iterations: int, learner_threads: int = 0
) -> dict[str, Any]:
    """One real trainer run, composed and host-validated as ``train`` does; figures from its run_summary.json."""
    from soakbench.runtime.artifacts import read_run_summary
    from soakbench.runtime.config import PlatformFacts, compose, validate_for_run
    from soakbench.runtime.manager.trainer import run_training

    log_dir = Path(tempfile.mkdtemp(prefix="soakbench_9b_")) / "run"
    composed = compose(
        algo,
        task,
        "mujoco",
        [
            f"algo.num_envs={num_envs}",
            f"algo.max_iterations={iterations}",
            f"algo.save_interval={iterations}",
            "training.no_play=true",
            f"log_dir={json.dumps(str(log_dir))}",
            *CPU_OVERRIDES[algo],
            *([f"training.learner_threads={learner_threads}"] if learner_threads > 0 else []),
        ],
    )
    cfg = validate_for_run(composed, PlatformFacts.detect())
    code = run_training(cfg)
    summary = read_run_summary(log_dir / "run_summary.json")
    if code != 0:
        raise SystemExit(f"{algo}/{num_envs}: trainer failed ({code}): {summary['failure_reason']}")
    replay = summary["runtime_manifest"]["replay_ingress"]
    loop_s = summary["total_env_steps"] / max(summary["env_steps_per_s"], 1e-9)
    return {
        "algo": algo,
        "num_envs": num_envs,
        "iterations": iterations,
        "learner_threads": cfg.resolved.learner_threads,
        "env_steps_per_s": round(summary["env_steps_per_s"], 1),
        "learner_updates_per_s": round(summary["learner_updates_per_s"], 2),
        "learner_ingress_wait_share": round(replay["learner_wait_s"] / loop_s, 4),
        "collector_backpressure_wait_s": round(replay["backpressure_wait_s"], 2),
        "loop_s": round(loop_s, 1),
        "log_dir": str(log_dir),
        "_cfg": cfg,
    }


def cell_figures(
    algo: str, task: str, num_envs: int, iterations: int, learner_threads: int
) -> dict[str, Any]:
    """The trainer figures of one cell plus the isolated learner's updates/s on the same config."""
    import torch

    from soakbench.runtime.env import make_env

    cell = trainer_cell(algo, task, num_envs, iterations, learner_threads)
    cfg = cell.pop("_cfg")
    env = make_env(cfg)  # dims only
    obs_dim, action_dim = env.obs_dim, env.action_dim
    env.close()
    torch.set_num_threads(cfg.resolved.learner_threads)  # same threads as the trainer's learner
    iso = isolated_updates_per_s(cfg, obs_dim, action_dim)
    cell["isolated_learner_updates_per_s"] = round(iso, 2)
    cell["update_share"] = round(cell["learner_updates_per_s"] / iso, 4)
    return cell


def main(
    learners: Annotated[str, typer.Option(help="comma list of sac, flashsac")] = "sac,flashsac",
    envs: Annotated[str, typer.Option(help="comma list of num_envs")] = "64,256",
    iterations: Annotated[int, typer.Option(help="trainer iterations (vector steps) per cell")] = 150,
    task: Annotated[str, typer.Option(help="task owner")] = "g1_walk_flat",
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    learner_threads: Annotated[
        int, typer.Option(help="training.learner_threads for every cell; 0 = the config rule (null)")
    ] = 0,
) -> None:
    """Run every (learner, num_envs) cell and print the figures (ratios measured in this run)."""
    from soakbench.runtime.config import ConfigError

    algos = [a.strip() for a in learners.split(",") if a.strip()]
    bad = [a for a in algos if a not in CPU_OVERRIDES]
    if bad or iterations < 1:
        typer.echo(f"--learners must list sac/flashsac (got {bad}); --iterations >= 1", err=True)
        raise typer.Exit(2)
    cells = []
    for algo in algos:
        for num_envs in (int(e) for e in envs.split(",")):
            try:
                cell = cell_figures(algo, task, num_envs, iterations, learner_threads)
            except ConfigError as exc:
                typer.echo(f"learner_throughput: {algo}/{num_envs}: configuration error: {exc}", err=True)
                raise typer.Exit(2) from None
            cells.append(cell)
            if not json_out:
                typer.echo(json.dumps(cell))
    if json_out:
        typer.echo(json.dumps({"benchmark": "learner_throughput", "task": task, "cells": cells}, indent=2))


if __name__ == "__main__":
    typer.run(main)
