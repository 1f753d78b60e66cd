"""Does a trained g1_walk_flat policy walk, or only stand? Episode length cannot tell: a robot that stands
upright until the time limit survives as long as one that walks. This measures the planar velocity
command error of the final checkpoint's deterministic actor against that of standing still.

    uv run --frozen python benchmarks/walk_command_tracking.py RUN_DIR [--envs 64] [--horizon 500]

Each world runs its first episode (up to ``--horizon`` steps or its fall). Per world and control step: the heading-frame planar velocity error
``|cmd_xy - v_xy|`` (recovered from the task's own ``track_lin_vel_xy`` term, exp(-err^2/0.25)) and the
error standing still would have, ``|cmd_xy|``, for the same command. Prints one JSON line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer


def main(
    run_dir: Annotated[Path, typer.Argument(help="a finished sac or flashsac g1_walk_flat run")],
    envs: Annotated[int, typer.Option(min=1, help="worlds")] = 64,
    horizon: Annotated[int, typer.Option(min=1, help="control steps (50 per second)")] = 500,
    seed: Annotated[int, typer.Option(help="env seed")] = 12345,
) -> None:
    """Roll the final policy out and print its command error against standing still."""
    import torch

    from runtime.config import load_run_config
    from runtime.env import make_env
    from runtime.learners import build_learner
    from runtime.tasks.g1_walk_flat import G1WalkFlat

    payload = torch.load(run_dir / "checkpoints" / "final.pt", map_location="cpu", weights_only=False)
    cfg = load_run_config(payload["config"]).with_num_envs(envs)
    if cfg.task.name != "g1_walk_flat":
        raise typer.BadParameter(f"task {cfg.task.name!r}: only g1_walk_flat has velocity commands")
    cpu = torch.device("cpu")
    env = make_env(cfg, device=cpu, seed=seed)
    if not isinstance(env, G1WalkFlat):
        raise typer.BadParameter(f"{type(env).__name__}: not the g1_walk_flat task")
    learner = build_learner(cfg.algo, env.obs_dim, env.action_dim, cpu, seed=cfg.seed)
    learner.load_state_dict(payload["learner"])
    learner.actor.eval()
    obs = env.reset()
    alive = torch.ones(envs, dtype=torch.bool)
    fell = torch.zeros(envs, dtype=torch.bool)
    errors, standing = [], []
    try:
        for _ in range(horizon):
            command = env.command[:, :2].clone()  # the command this step is judged against
            with torch.inference_mode():
                out = env.step(learner.actor.act(obs, deterministic=True))
            term = env.last_terms["track_lin_vel_xy"].clamp_min(1e-30)
            err = torch.sqrt(-0.25 * torch.log(term))
            errors.append(err[alive])
            standing.append(command.norm(dim=-1)[alive])
            fell |= out.terminated & alive
            alive &= ~(out.terminated | out.truncated)
            if not alive.any():
                break
            obs = out.obs
    finally:
        env.close()
    trained, still = torch.cat(errors), torch.cat(standing)
    result = {
        "run_dir": run_dir.name,
        "total_env_steps": int(payload["total_env_steps"]),
        "worlds": envs,
        "horizon": horizon,
        "world_steps_judged": int(trained.numel()),
        "fraction_fallen": float(fell.float().mean()),
        "velocity_error_mps": {"trained": float(trained.mean()), "standing_still": float(still.mean())},
        "error_ratio": float(trained.mean() / still.mean()) if float(still.mean()) > 0 else math.nan,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    typer.run(main)
