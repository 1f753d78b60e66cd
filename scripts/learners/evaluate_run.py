"""Survival-length evaluation of a finished run's checkpoints (runtime/learners/evaluation.py).

    uv run --frozen python scripts/learners/evaluate_run.py /abs/run_dir            # final.pt
    uv run --frozen python scripts/learners/evaluate_run.py /abs/run_dir --all      # every checkpoint

Prints one JSON line per checkpoint: mean first-episode length (control steps, censored at --horizon)
of the trained actor (deterministic, stochastic), the untrained actor and uniform-random actions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def main(
    run_dir: Annotated[Path, typer.Argument(help="absolute run directory with checkpoints/")],
    num_envs: Annotated[int, typer.Option(min=1, help="worlds per policy")] = 32,
    horizon: Annotated[int, typer.Option(min=1, help="control steps per world")] = 300,
    all_checkpoints: Annotated[bool, typer.Option("--all", help="every ckpt_*.pt, then final.pt")] = False,
    threads: Annotated[int, typer.Option(min=1, help="torch intra-op threads")] = 1,
) -> None:
    """Evaluate the run's final (or every) checkpoint; exit 2 when there is none."""
    import torch

    from soakbench.runtime.learners.evaluation import evaluate_run

    torch.set_num_threads(threads)
    ckpt_dir = run_dir / "checkpoints"
    names = sorted(p.name for p in ckpt_dir.glob("ckpt_*.pt")) if all_checkpoints else []
    names.append("final.pt")
    if not (ckpt_dir / "final.pt").is_file():
        typer.echo(f"{ckpt_dir / 'final.pt'}: missing; evaluate a completed run", err=True)
        raise typer.Exit(2)
    for name in names:
        result = evaluate_run(run_dir, num_envs, horizon, checkpoint=name)
        means = {k: round(v["mean"], 1) for k, v in result.items() if isinstance(v, dict)}
        typer.echo(json.dumps({"checkpoint": name, "env_steps": result["total_env_steps"], **means}))


if __name__ == "__main__":
    typer.run(main)
