"""Does a trained g1_walk_flat policy walk, or only stand? Episode length cannot tell: a robot that stands
upright until the time limit survives as long as one that walks. This measures the planar velocity
command error of the final checkpoint's deterministic actor against that of standing still.

    uv run --frozen python benchmarks/walk_command_tracking.py RUN_DIR [--envs 64] [--horizon 500]

Each world runs its first episode (up to ``--horizon`` steps or its fall). Per world and control step:
the heading-frame planar velocity error ``|cmd_xy - v_xy|`` (recovered from the task's own
``track_lin_vel_xy`` term, exp(-err^2/0.25)) and the error standing still would have, ``|cmd_xy|``, for
the same command. Prints one JSON line; a run without a readable final checkpoint, or of another task,
exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import torch

# runtime.tasks.g1_walk_flat.tracking_terms: track_lin_vel_xy = exp(-err^2 / LIN_VEL_SIGMA_SQ)
LIN_VEL_SIGMA_SQ = 0.25


def velocity_error(track_lin_vel_xy: torch.Tensor) -> torch.Tensor:
    """``|cmd_xy - v_xy|`` in m/s from the task's tracking term (the inverse of its exp kernel)."""
    import torch

    return torch.sqrt(-LIN_VEL_SIGMA_SQ * torch.log(track_lin_vel_xy.clamp_min(1e-30)))


def _restored(run_dir: Path, envs: int) -> Any:
    from soakbench.runtime.learners.evaluation import CheckpointError, TaskMismatchError, restore_run
    from soakbench.runtime.tasks.g1_walk_flat import G1WalkFlat

    try:
        return restore_run(run_dir, envs, task=G1WalkFlat)
    except TaskMismatchError as exc:
        raise typer.BadParameter(
            f"{exc}: only g1_walk_flat has velocity commands", param_hint="RUN_DIR"
        ) from exc
    except CheckpointError as exc:
        raise typer.BadParameter(str(exc), param_hint="RUN_DIR") from exc


def main(
    run_dir: Annotated[Path, typer.Argument(help="a finished sac or flashsac g1_walk_flat run")],
    envs: Annotated[int, typer.Option(min=1, help="worlds")] = 64,
    horizon: Annotated[int, typer.Option(min=1, help="control steps (50 per second)")] = 500,
    seed: Annotated[int, typer.Option(help="env seed")] = 12345,
) -> None:
    """Roll the final policy out and print its command error against standing still."""
    import torch

    run = _restored(run_dir, envs)
    env, learner = run.make_env(seed), run.learner
    obs = env.reset()
    alive = torch.ones(envs, dtype=torch.bool)
    fell = torch.zeros(envs, dtype=torch.bool)
    errors, standing = [], []
    try:
        for _ in range(horizon):
            command = env.command[:, :2].clone()  # the command this step is judged against
            with torch.inference_mode():
                out = env.step(learner.actor.act(obs, deterministic=True))
            errors.append(velocity_error(env.last_terms["track_lin_vel_xy"])[alive])
            standing.append(command.norm(dim=-1)[alive])
            fell |= out.terminated & alive
            alive &= ~(out.terminated | out.truncated)
            if not alive.any():
                break
            obs = out.obs
    finally:
        env.close()
    trained, still = float(torch.cat(errors).mean()), float(torch.cat(standing).mean())
    result = {
        "run_dir": run_dir.name,
        "total_env_steps": run.total_env_steps,
        "worlds": envs,
        "horizon": horizon,
        "world_steps_judged": sum(int(e.numel()) for e in errors),
        "fraction_fallen": float(fell.float().mean()),
        "velocity_error_mps": {"trained": trained, "standing_still": still},
        "error_ratio": trained / still if still > 0 else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    typer.run(main)
