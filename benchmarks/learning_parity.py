"""Learning parity: does ``train`` with a stated recipe learn the task within an env-step budget?

For each seed it runs the real ``train`` CLI (collector process, shared-memory ingress, learner) with
the recipe's overrides, reads the run's own TensorBoard windows back (``harness.metrics``), and, with
``--evaluate-checkpoints``, measures the survival of each saved checkpoint's policy
(``runtime.learners.evaluation``). It writes one schema-versioned JSON result (``learning-parity-1``)
and a plot of the mean training episode length against env steps and against wall time.

    uv run --frozen python benchmarks/learning_parity.py --algo sac --task g1_walk_flat --sim mujoco \
        --num-envs 2048 --env-steps 10260480 --seeds 0 --seeds 1 \
        --out runs/learning_parity/sac_walk.json --plot docs/img/learning_parity_sac_walk.png

    # a recipe is a list of config overrides, exactly as `train` takes them
    uv run --frozen python benchmarks/learning_parity.py ... --set algo.updates_per_iteration=8 \
        --set algo.batch_size=1024

The training measure is the episode-count-weighted mean of ``episode/length_mean`` over the last
``--smoothing-windows`` TensorBoard windows (as ``extract-metrics --last 20`` averages them); the
target is reached at the first window where that running mean is at or above ``--target``. Every figure
in the result is recomputed from the raw windows it stores.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

RESULT_SCHEMA = "learning-parity-1"
RESULT_SCHEMA_FILE = f"{RESULT_SCHEMA}.schema.json"
TRAIN_TIMEOUT_S = 6 * 3600
# What each checkpoint's evaluation records; the other rollouts of evaluate_run are not computed.
EVALUATED_POLICIES = ("trained_deterministic", "uniform_random")


@dataclass(frozen=True)
class Recipe:
    """What one benchmark trains: the route, the envs and budget per seed, the overrides and the goal."""

    algo: str
    task: str
    sim: str
    num_envs: int  # envs per collector iteration
    env_step_budget: int  # env steps per seed (iterations = ceil(budget / num_envs))
    overrides: tuple[str, ...]  # config overrides exactly as `train` takes them
    target_episode_length: float  # control steps
    smoothing_windows: int  # TensorBoard windows in the running mean


@dataclass(frozen=True)
class Window:
    """One TensorBoard window of a run: the step is total env steps, wall_s is since the first window."""

    env_steps: int
    wall_s: float
    episode_count: float
    episode_length_mean: float | None
    episode_reward_mean: float | None
    updates_total: float | None


@dataclass(frozen=True)
class Crossing:
    """Where the smoothed mean episode length first reached the target."""

    env_steps: int
    wall_s: float
    smoothed_length: float


def windows_from_metrics(windows: Sequence[Mapping[str, Any]]) -> list[Window]:
    """Typed windows from ``extract_metrics(...)["windows"]``; wall time counts from the first window."""
    if not windows:
        return []
    t0 = float(windows[0]["wall_time"])
    out = []
    for w in windows:
        m = w["metrics"]
        out.append(
            Window(
                env_steps=int(w["step"]),
                wall_s=float(w["wall_time"]) - t0,
                episode_count=float(m.get("episode/count") or 0.0),
                episode_length_mean=_finite_or_none(m.get("episode/length_mean")),
                episode_reward_mean=_finite_or_none(m.get("episode/reward_mean")),
                updates_total=_finite_or_none(m.get("learner/updates_total")),
            )
        )
    return out


def _finite_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def weighted_mean(windows: Sequence[Window], field: str) -> float | None:
    """Episode-count-weighted mean of ``field`` over windows that finished episodes."""
    pairs = [(w.episode_count, getattr(w, field)) for w in windows]
    pairs = [(c, v) for c, v in pairs if c > 0 and v is not None]
    total = sum(c for c, _ in pairs)
    return sum(c * v for c, v in pairs) / total if total else None


def smoothed_lengths(windows: Sequence[Window], span: int) -> list[float | None]:
    """Per window, the weighted mean episode length of it and the ``span - 1`` windows before it."""
    if span < 1:
        raise ValueError(f"span must be >= 1, got {span}")
    return [
        weighted_mean(windows[max(0, i - span + 1) : i + 1], "episode_length_mean")
        for i in range(len(windows))
    ]


def first_crossing(windows: Sequence[Window], target: float, span: int) -> Crossing | None:
    """The first window whose smoothed mean episode length is >= ``target``; None if none is."""
    for window, value in zip(windows, smoothed_lengths(windows, span), strict=True):
        if value is not None and value >= target:
            return Crossing(window.env_steps, window.wall_s, value)
    return None


def seed_summary(windows: Sequence[Window], target: float, span: int, wall_s: float) -> dict[str, Any]:
    """Figures of one seed's run, all recomputed from its windows (plus the trainer's wall time)."""
    last = windows[-span:]
    env_steps = windows[-1].env_steps if windows else 0
    updates = next((w.updates_total for w in reversed(windows) if w.updates_total is not None), None)
    crossing = first_crossing(windows, target, span)
    return {
        "final_episode_length_mean": weighted_mean(last, "episode_length_mean"),
        "final_episode_reward_mean": weighted_mean(last, "episode_reward_mean"),
        "initial_episode_length_mean": weighted_mean(windows[:span], "episode_length_mean"),
        "env_steps": env_steps,
        "updates_total": updates,
        "env_steps_per_s": env_steps / wall_s if wall_s > 0 else None,
        "updates_per_s": updates / wall_s if updates is not None and wall_s > 0 else None,
        "reached": None if crossing is None else asdict(crossing),
    }


def budget_iterations(env_steps: int, num_envs: int) -> int:
    """Trainer iterations that cover an env-step budget: the run's ``algo.max_iterations``."""
    return math.ceil(env_steps / num_envs)


def train_overrides(
    algo_num_envs: int, env_steps: int, log_dir: Path, seed: int, recipe: Sequence[str]
) -> list[str]:
    """The ``train`` overrides of one seed's run: the budget first, then the recipe (which may not set them)."""
    fixed = {"algo.num_envs", "algo.max_iterations", "log_dir", "seed"}
    clash = sorted(o.split("=", 1)[0] for o in recipe if o.split("=", 1)[0] in fixed)
    if clash:
        raise ValueError(
            f"--set may not override {', '.join(clash)}: the benchmark sets them from its options"
        )
    iterations = budget_iterations(env_steps, algo_num_envs)
    return [
        f"algo.num_envs={algo_num_envs}",
        f"algo.max_iterations={iterations}",
        f"log_dir={log_dir}",
        f"seed={seed}",
        *recipe,
    ]


def _train_executable() -> str:
    beside = Path(sys.executable).parent / "train"
    return str(beside) if beside.is_file() else "train"


def train_log(log_dir: Path) -> Path:
    return log_dir.with_name(log_dir.name + ".train.log")


def run_seed(route: Sequence[str], overrides: Sequence[str], log_dir: Path) -> tuple[int, float]:
    """Run one training to completion; (exit code, wall seconds). Its output goes to ``<log_dir>.train.log``
    beside the run (``train`` wants a new or empty log dir)."""
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with train_log(log_dir).open("wb") as log:
        done = subprocess.run(
            [_train_executable(), *route, *overrides],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=TRAIN_TIMEOUT_S,
        )
    return done.returncode, time.monotonic() - started


def checkpoints_to_evaluate(saved: Sequence[str], last: int, final_iteration: int) -> list[str]:
    """The periodic checkpoints in step order, then ``final.pt``; only the last ``last`` of them if > 0.

    The periodic checkpoint of ``final_iteration`` holds the same policy as ``final.pt`` (no update
    happens between them), so it is left out rather than evaluated twice.
    """
    duplicate = f"ckpt_{final_iteration:08d}.pt"
    periodic = sorted(n for n in saved if n.startswith("ckpt_") and n != duplicate)
    names = [*periodic, "final.pt"]
    return names[-last:] if last > 0 else names


def evaluate_checkpoints(
    run_dir: Path, final_iteration: int, num_envs: int, horizon: int, last: int = 0
) -> list[dict[str, Any]]:
    """Deterministic survival of the saved checkpoints' policies vs uniform-random actions."""
    from soakbench.runtime.learners.evaluation import evaluate_run

    saved = [p.name for p in (run_dir / "checkpoints").glob("ckpt_*.pt")]
    out = []
    for name in checkpoints_to_evaluate(saved, last, final_iteration):
        result = evaluate_run(
            run_dir, num_envs=num_envs, horizon=horizon, checkpoint=name, policies=EVALUATED_POLICIES
        )
        out.append(
            {
                "checkpoint": name,
                "env_steps": result["total_env_steps"],
                "trained_deterministic_mean": result["trained_deterministic"]["mean"],
                "uniform_random_mean": result["uniform_random"]["mean"],
            }
        )
    return out


def output_problem(path: Path) -> str | None:
    """Why the benchmark could not write ``path`` at the end, or None."""
    if path.exists():
        return f"{path} exists; choose a new path"
    if not path.resolve().parent.is_dir():
        return f"parent directory {path.resolve().parent} does not exist"
    return None


def build_result(
    recipe: Recipe, seeds: Sequence[Mapping[str, Any]], context: Mapping[str, Any]
) -> dict[str, Any]:
    """The result document: the recipe, each seed's raw windows and recomputed summary, and the context."""
    spec = {**asdict(recipe), "overrides": list(recipe.overrides)}
    return {"schema_version": RESULT_SCHEMA, "recipe": spec, "seeds": list(seeds), **context}


def validate_result(result: Mapping[str, Any]) -> None:
    """Raise ValueError naming every schema problem of a result (the schema lives in foundation/schemas)."""
    from soakbench.foundation.schema import validation_errors

    problems = validation_errors(result, RESULT_SCHEMA_FILE)
    if problems:
        raise ValueError("learning-parity result does not match its schema: " + "; ".join(problems))


def plot(result: Mapping[str, Any], path: Path) -> None:
    """Mean episode length (smoothed as in the summary) against env steps and against wall time."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    from soakbench.foundation.atomic import write_atomic

    recipe = result["recipe"]
    fig, (ax_steps, ax_wall) = plt.subplots(1, 2, figsize=(11, 4))
    for seed in result["seeds"]:
        windows = [Window(**w) for w in seed["windows"]]
        smooth = smoothed_lengths(windows, recipe["smoothing_windows"])
        label = f"seed {seed['seed']}"
        ax_steps.plot([w.env_steps for w in windows], smooth, label=label)
        ax_wall.plot([w.wall_s / 60 for w in windows], smooth, label=label)
    for ax, xlabel in ((ax_steps, "env steps"), (ax_wall, "wall time (min)")):
        ax.axhline(recipe["target_episode_length"], color="grey", linestyle="--", label="target")
        ax.set(xlabel=xlabel, ylabel="mean episode length (control steps)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{recipe['algo']} / {recipe['task']} / {recipe['sim']}, {recipe['num_envs']} envs")
    fig.tight_layout()
    tmp = path.with_name(path.name + ".render.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    data = tmp.read_bytes()
    tmp.unlink()
    write_atomic(path, data)


def _context() -> dict[str, Any]:
    from soakbench.harness.context import REPO_ROOT, host_context, software_context, source_context

    return {"source": source_context(REPO_ROOT), "host": host_context(), "software": software_context()}


def _one_seed(
    recipe: Recipe, seed: int, runs_dir: Path, evaluate: tuple[int, int, int] | None
) -> dict[str, Any]:
    from soakbench.harness.metrics import extract_metrics

    log_dir = runs_dir / f"seed{seed}"
    route = ["--algo", recipe.algo, "--task", recipe.task, "--sim", recipe.sim]
    overrides = train_overrides(recipe.num_envs, recipe.env_step_budget, log_dir, seed, recipe.overrides)
    code, wall_s = run_seed(route, overrides, log_dir)
    if code != 0:
        print(
            f"learning_parity: train exited {code} for seed {seed}; see {train_log(log_dir)}", file=sys.stderr
        )
        raise typer.Exit(1)
    windows = windows_from_metrics(extract_metrics(log_dir, last=10**9)["windows"])
    summary = seed_summary(windows, recipe.target_episode_length, recipe.smoothing_windows, wall_s)
    iterations = budget_iterations(recipe.env_step_budget, recipe.num_envs)
    checkpoints = evaluate_checkpoints(log_dir, iterations, *evaluate) if evaluate else []
    return {
        "seed": seed,
        "run_dir": log_dir.name,  # under --runs-dir; a result shared elsewhere names no host's paths
        "wall_s": wall_s,
        "summary": summary,
        "checkpoints": checkpoints,
        "windows": [asdict(w) for w in windows],
    }


def main(  # noqa: PLR0913 — typer declares one parameter per CLI option
    algo: Annotated[str, typer.Option(help="sac | flashsac")],
    task: Annotated[str, typer.Option(help="g1_walk_flat | g1_motion_tracking")],
    sim: Annotated[str, typer.Option(help="mujoco | mjwarp")] = "mujoco",
    num_envs: Annotated[int, typer.Option(min=1, help="envs per iteration")] = 2048,
    env_steps: Annotated[int, typer.Option(min=1, help="env-step budget per seed")] = 10_260_480,
    seeds: Annotated[list[int] | None, typer.Option("--seeds", help="one run per seed (repeat)")] = None,
    recipe: Annotated[
        list[str] | None, typer.Option("--set", help="config override KEY=VALUE (repeat)")
    ] = None,
    target: Annotated[
        float, typer.Option(min=1.0, help="mean episode length to reach (control steps)")
    ] = 900.0,
    smoothing_windows: Annotated[int, typer.Option(min=1, help="windows in the running mean")] = 20,
    evaluate_envs: Annotated[int, typer.Option(min=0, help="worlds per checkpoint evaluation; 0 = none")] = 0,
    evaluate_horizon: Annotated[int, typer.Option(min=1, help="control steps per evaluation world")] = 1000,
    evaluate_last: Annotated[
        int, typer.Option(min=0, help="evaluate only the last N checkpoints (final.pt counts); 0 = all")
    ] = 0,
    out: Annotated[Path, typer.Option(help="result JSON path (learning-parity-1)")] = Path(
        "learning_parity.json"
    ),
    plot_path: Annotated[Path | None, typer.Option("--plot", help="PNG of the curves")] = None,
    runs_dir: Annotated[
        Path | None, typer.Option(help="absolute directory for the runs (must not exist)")
    ] = None,
) -> None:
    """Train each seed with the recipe, then write the result JSON (and the plot)."""
    from soakbench.foundation.atomic import write_atomic

    runs = (runs_dir or out.with_suffix("").with_name(out.stem + "_runs")).resolve()
    if runs.exists():
        raise typer.BadParameter(f"{runs} exists; choose another --runs-dir", param_hint="--runs-dir")
    for hint, path in (("--out", out), ("--plot", plot_path)):
        if path is not None and (problem := output_problem(path)):
            raise typer.BadParameter(problem, param_hint=hint)  # before hours of training, not after
    spec = Recipe(algo, task, sim, num_envs, env_steps, tuple(recipe or ()), target, smoothing_windows)
    try:
        train_overrides(num_envs, env_steps, runs, 0, spec.overrides)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    evaluate = (evaluate_envs, evaluate_horizon, evaluate_last) if evaluate_envs else None
    context = _context()  # the source the runs start from: the tree may change during hours of training
    results = [_one_seed(spec, seed, runs, evaluate) for seed in (seeds or [0])]
    result = build_result(spec, results, context)
    validate_result(result)
    import json

    write_atomic(out, json.dumps(result, indent=1, sort_keys=True) + "\n")
    if plot_path is not None:
        plot(result, plot_path)
    for r in results:
        print(json.dumps({"seed": r["seed"], "wall_s": round(r["wall_s"], 1), **r["summary"]}))


if __name__ == "__main__":
    typer.run(main)
