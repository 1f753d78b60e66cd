"""Machinery overhead: what the training machinery costs, measured as ratios within one run.

Default (``--learner null``): bare env throughput (``make_env`` + uniform random actions, this process) against the
collector's env throughput inside ``run_training`` with the *null learner* (ingests and releases every
slot, no gradient steps), same host, same config, interleaved bare -> trainer -> bare. ``ratio`` is
the same workload (random actions for the whole run); ``ratio_with_policy`` has the collector act with
the actor (policy inference per step). Target ratio >= 0.85.

Full trainer (``--learner sac|flashsac``): the full trainer with a real learner: env steps/s, learner updates/s and
the share of the learner's loop time spent waiting on the replay ingress.

    uv run --frozen python benchmarks/machinery_overhead.py --num-envs 64 --iterations 200
    uv run --frozen python benchmarks/machinery_overhead.py --learner sac --num-envs 256 --iterations 100 \
        --override algo.learning_starts=256

Throughput of a trainer run = total_env_steps / the learner loop time (attach -> last slot ingested),
from its own run_summary.json.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from soakbench.runtime.config import ComposedConfig, RunConfig
    from soakbench.runtime.tasks.base import TaskEnv


def bare_env_steps_per_s(
    cfg: ComposedConfig, iterations: int, warmup: int = 5, torch_threads: int | None = None
) -> float:
    """Env steps/s of ``make_env(cfg)`` stepped with uniform random actions in [-1, 1], optionally with
    torch limited to ``torch_threads`` intra-op threads (restored afterwards)."""
    import torch

    from soakbench.runtime.env import make_env

    previous = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        return _bare(make_env(cfg), iterations, warmup)
    finally:
        torch.set_num_threads(previous)


def _bare(env: TaskEnv, iterations: int, warmup: int) -> float:
    import torch

    try:
        env.reset()
        shape = (env.num_envs, env.action_dim)
        for _ in range(warmup):
            env.step(torch.rand(shape) * 2 - 1)
        start = time.perf_counter()
        for _ in range(iterations):
            env.step(torch.rand(shape) * 2 - 1)
        return float(env.num_envs * iterations / (time.perf_counter() - start))
    finally:
        env.close()


def run_config(algo: str, task: str, overrides: list[str]) -> RunConfig:
    """The ``train`` route for this benchmark: compose, then validate for this host, in a fresh log_dir."""
    from soakbench.runtime.config import PlatformFacts, compose, validate_for_run

    log_dir = Path(tempfile.mkdtemp(prefix="soakbench_bench_")) / "run"
    cfg = compose(algo, task, "mujoco", [*overrides, f"log_dir={json.dumps(str(log_dir))}"])
    return validate_for_run(cfg, PlatformFacts.detect())


def trainer_run(
    cfg: RunConfig, null_learner: bool, collector_torch_threads: int | None = 1
) -> dict[str, Any]:
    """One ``run_training`` of ``cfg``; returns its (schema-validated) summary."""
    from soakbench.runtime.artifacts import read_run_summary
    from soakbench.runtime.manager.hooks import TrainerHooks
    from soakbench.runtime.manager.null_learner import null_learner_factory
    from soakbench.runtime.manager.trainer import run_training

    assert cfg.log_dir is not None  # validate_for_run requires it
    log_dir = Path(cfg.log_dir)
    hooks = TrainerHooks(
        learner_factory=null_learner_factory if null_learner else None,
        collector_torch_threads=collector_torch_threads,
    )
    code = run_training(cfg, hooks)
    summary = read_run_summary(log_dir / "run_summary.json")
    if code != 0:
        raise SystemExit(f"trainer run failed ({code}): {summary['failure_reason']} (log_dir {log_dir})")
    summary["_log_dir"] = str(log_dir)
    return summary


def overhead_figures(
    cfg: ComposedConfig, runs: list[RunConfig], iterations: int, threads: int | None
) -> dict[str, Any]:
    """Bare env before/after the two null-learner trainer runs (random actions, then the actor)."""
    # Bare env both with torch's default threads and with the collector's thread count; the ratio is
    # taken against the faster configuration (the stricter baseline), before/after averaged.
    before = [
        bare_env_steps_per_s(cfg, iterations),
        bare_env_steps_per_s(cfg, iterations, torch_threads=threads),
    ]
    # Same workload as the bare env (uniform random actions: the whole run is prefill), then the
    # collector acting with the (untrained) actor, which adds policy inference per step.
    summary = trainer_run(runs[0], null_learner=True, collector_torch_threads=threads)
    policy = trainer_run(runs[1], null_learner=True, collector_torch_threads=threads)
    after = [
        bare_env_steps_per_s(cfg, iterations),
        bare_env_steps_per_s(cfg, iterations, torch_threads=threads),
    ]
    bare = max((before[0] + after[0]) / 2, (before[1] + after[1]) / 2)
    return {
        "bare_env_steps_per_s_default_threads": [round(before[0], 1), round(after[0], 1)],
        "bare_env_steps_per_s_collector_threads": [round(before[1], 1), round(after[1], 1)],
        "collector_torch_threads": threads,
        "collector_env_steps_per_s": summary["env_steps_per_s"],
        "ratio": round(summary["env_steps_per_s"] / bare, 4),
        "collector_env_steps_per_s_with_policy": policy["env_steps_per_s"],
        "ratio_with_policy": round(policy["env_steps_per_s"] / bare, 4),
        "collector_time_split_s": summary["runtime_manifest"]["collector"],
        "target_ratio": 0.85,
        "log_dir": summary["_log_dir"],  # of the first trainer run
    }


def trainer_figures(run: RunConfig, threads: int | None) -> dict[str, Any]:
    """The full trainer with a real learner."""
    summary = trainer_run(run, null_learner=False, collector_torch_threads=threads)
    loop_s = summary["total_env_steps"] / max(summary["env_steps_per_s"], 1e-9)
    replay = summary["runtime_manifest"]["replay_ingress"]
    return {
        "env_steps_per_s": summary["env_steps_per_s"],
        "learner_updates_per_s": summary["learner_updates_per_s"],
        "learner_ingress_wait_share": round(replay["learner_wait_s"] / loop_s, 4),
        "collector_backpressure_wait_s": replay["backpressure_wait_s"],
        "log_dir": summary["_log_dir"],
    }


def main(  # noqa: PLR0913 — one parameter per command-line option (typer)
    num_envs: Annotated[int, typer.Option(help="algo.num_envs")] = 64,
    iterations: Annotated[int, typer.Option(help="vector steps per measurement")] = 200,
    task: Annotated[str, typer.Option(help="task owner")] = "g1_walk_flat",
    algo: Annotated[str, typer.Option(help="algo owner (actor shape; learner only with --learner)")] = "sac",
    learner: Annotated[
        str, typer.Option(help="null (machinery overhead) | sac | flashsac (full trainer)")
    ] = "null",
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    override: Annotated[list[str] | None, typer.Option(help="extra dotted.key=value config override")] = None,
    collector_torch_threads: Annotated[
        int, typer.Option(help="collector torch threads (0: torch default)")
    ] = 1,
) -> None:
    """Measure the machinery overhead (null learner) or the full trainer on this host."""
    from soakbench.runtime.config import ConfigError, compose

    if learner not in ("null", "sac", "flashsac"):
        raise typer.BadParameter("--learner must be null, sac or flashsac")
    algo = algo if learner == "null" else learner
    base = [
        f"algo.num_envs={num_envs}",
        f"algo.max_iterations={iterations}",
        f"algo.save_interval={iterations}",
        "training.no_play=true",
        *(override or []),
    ]
    try:  # every configuration of this measurement, before anything runs
        cfg = compose(algo, task, "mujoco", base)
        runs = [run_config(algo, task, base)]
        if learner == "null":  # the first trainer run is prefill throughout (uniform random actions)
            runs.insert(0, run_config(algo, task, [*base, f"algo.prefill_iterations={iterations}"]))
    except ConfigError as exc:
        typer.echo(f"machinery_overhead: configuration error: {exc}", err=True)
        raise typer.Exit(2) from None
    result: dict[str, Any] = {
        "benchmark": "machinery_overhead" if learner == "null" else "full_trainer",
        "learner": learner,
    }
    result.update(algo=algo, task=task, num_envs=num_envs, iterations=iterations, overrides=override or [])
    threads = collector_torch_threads or None
    if learner == "null":
        result.update(overhead_figures(cfg, runs, iterations, threads))
    else:
        result.update(trainer_figures(runs[0], threads))
    if json_out:
        print(json.dumps(result, sort_keys=True))
        return
    for key, value in result.items():
        print(f"{key:32s} {value}")


if __name__ == "__main__":
    typer.run(main)
