"""How well does a trained g1_motion_tracking policy follow the clip? Tracking episodes end when the robot
falls or leaves the reference, so the episode length is one measure; the other is how far the pose is
from the reference while it lasts. This rolls out the final checkpoint's deterministic actor and, on the
same worlds and seed, the untrained actor the run started from.

    uv run --frozen python benchmarks/motion_tracking_error.py RUN_DIR [--envs 64] [--horizon 500]

Each world runs its first episode (up to ``--horizon`` steps, the clip's end or a termination). Per world
and control step, recovered from the task's own tracking terms (exp kernels, inverted): the anchor
position error (m), the RMS body position error over the tracked bodies (m) and their RMS orientation
error (rad). Errors are averaged over the steps a world was still in its episode. Prints one JSON line;
a run without a readable final checkpoint, or of another task, exits 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import torch

# runtime.tasks.g1_motion_tracking.tracking_terms: term = exp(-error^2 / sigma^2)
KERNEL_SIGMA_SQ = {"anchor_pos": 0.3**2, "body_pos": 0.3**2, "body_ori": 0.4**2}
ERROR_NAMES = {
    "anchor_pos": "anchor_position_m",
    "body_pos": "body_position_rms_m",
    "body_ori": "body_orientation_rms_rad",
}


def kernel_error(term: torch.Tensor, sigma_sq: float) -> torch.Tensor:
    """The error inside ``exp(-error^2 / sigma_sq)``: the inverse of the task's kernel."""
    import torch

    return torch.sqrt(-sigma_sq * torch.log(term.clamp_min(1e-30)))


def _restored(run_dir: Path, envs: int) -> Any:
    from soakbench.runtime.learners.evaluation import CheckpointError, TaskMismatchError, restore_run
    from soakbench.runtime.tasks.g1_motion_tracking import G1MotionTracking

    try:
        return restore_run(run_dir, envs, task=G1MotionTracking)
    except TaskMismatchError as exc:
        raise typer.BadParameter(
            f"{exc}: only g1_motion_tracking has a reference clip", param_hint="RUN_DIR"
        ) from exc
    except CheckpointError as exc:
        raise typer.BadParameter(str(exc), param_hint="RUN_DIR") from exc


def rollout(env: Any, act: Callable[[torch.Tensor], torch.Tensor], horizon: int) -> dict[str, Any]:
    """First-episode length per world and the mean tracking errors over its steps."""
    import torch

    obs = env.reset()
    n = env.num_envs
    lengths = torch.full((n,), float(horizon))
    alive = torch.ones(n, dtype=torch.bool)
    terminated = torch.zeros(n, dtype=torch.bool)
    errors: dict[str, list[torch.Tensor]] = {name: [] for name in KERNEL_SIGMA_SQ}
    for t in range(horizon):
        with torch.inference_mode():
            out = env.step(act(obs))
        for name, sigma_sq in KERNEL_SIGMA_SQ.items():
            errors[name].append(kernel_error(env.last_terms[name], sigma_sq)[alive])
        done = (out.terminated | out.truncated) & alive
        lengths[done] = float(t + 1)
        terminated |= out.terminated & alive
        alive &= ~done
        if not alive.any():
            break
        obs = out.obs
    return {
        "episode_length_mean": float(lengths.mean()),
        "fraction_terminated": float(terminated.float().mean()),
        **{ERROR_NAMES[k]: float(torch.cat(v).mean()) for k, v in errors.items()},
    }


def main(
    run_dir: Annotated[Path, typer.Argument(help="a finished sac or flashsac g1_motion_tracking run")],
    envs: Annotated[int, typer.Option(min=1, help="worlds")] = 64,
    horizon: Annotated[int, typer.Option(min=1, help="control steps (50 per second)")] = 500,
    seed: Annotated[int, typer.Option(help="env seed")] = 12345,
) -> None:
    """Roll the final and the untrained policy out and print their episode lengths and tracking errors."""
    run = _restored(run_dir, envs)
    result: dict[str, Any] = {
        "run_dir": run_dir.name,
        "total_env_steps": run.total_env_steps,
        "worlds": envs,
        "horizon": horizon,
    }
    for name, learner in (("trained", run.learner), ("untrained", run.untrained_learner())):
        env = run.make_env(seed)  # the same initial states for both
        try:
            result[name] = rollout(env, partial(learner.actor.act, deterministic=True), horizon)
        finally:
            env.close()
    print(json.dumps(result))


if __name__ == "__main__":
    typer.run(main)
