"""Backend throughput benchmark: MuJoCo CPU host bridge against the raw ``mujoco.rollout`` limit.

All figures come from ONE process and are measured in interleaved rounds (raw, engines, envs, raw,
...), so each round's ratio compares measurements taken seconds apart on the same (noisy) host. The
reported figure is the median over rounds. Nothing is asserted: this prints ratios.

    uv run --frozen python scripts/benchmark/backend_throughput.py --num-envs 64,256 --threads 2

Per ``num_envs`` it reports:
  raw_physics              the physics-limit reference: mujoco.rollout on a persistent Rollout pool of
                           T threads, nstep=decimation per call, FULLPHYSICS state fed back, stand
                           targets + per-control-step noise (what a random policy does); no torch
  raw_long_rollout         informational: ONE rollout call of all substeps; slower than raw_physics
                           because its [N, S, state+sensors] outputs (tens of MB) stream through memory
  backend:<engine>         MujocoBackend control steps x N per second (batch, threads engines)
  env:<task>_env_steps_per_s  TaskEnv.step via make_env (obs, reward, resets included)
  ratio = env steps/s / (raw physics steps/s / decimation)   (target >= 0.7 at 256 envs, 2 cores)
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import mujoco
import numpy as np
import torch
import typer
from mujoco import rollout
from rich.console import Console
from rich.table import Table

from runtime.assets import load_model
from runtime.backends.mujoco import MujocoBackend, available_cpus

SCENE = "robots/g1/scene_flat.xml"
ACTION_SCALE = 0.25  # rad per unit action, as the G1 task owners
TASKS = ("g1_walk_flat", "g1_motion_tracking")
app = typer.Typer(add_completion=False, help=__doc__)


def _controls(model: mujoco.MjModel, num_envs: int, steps: int, seed: int) -> np.ndarray:
    """[steps, N, nu] stand targets + uniform(-scale, scale) noise, like a random policy."""
    rng = np.random.default_rng(seed)
    stand = model.key("stand").ctrl
    return stand + ACTION_SCALE * rng.uniform(-1.0, 1.0, (steps, num_envs, model.nu))


def _stand_state(model: mujoco.MjModel) -> tuple[np.ndarray, mujoco.MjData]:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    mujoco.mj_forward(model, data)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    return state, data


def raw_rollout(model: mujoco.MjModel, n: int, threads: int, ctrl: np.ndarray, dec: int) -> float:
    """Physics steps/s of one ``mujoco.rollout`` over ``ctrl`` [S, N, nu] held ``dec`` substeps each."""
    state0, _ = _stand_state(model)
    nstep = ctrl.shape[0] * dec
    control = np.ascontiguousarray(np.repeat(ctrl.transpose(1, 0, 2), dec, axis=1))
    datas = [mujoco.MjData(model) for _ in range(max(1, threads))]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    out_state = np.empty((n, nstep, mujoco.mj_stateSize(model, spec)))
    out_sens = np.empty((n, nstep, model.nsensordata))
    init = np.ascontiguousarray(np.tile(state0, (n, 1)))
    with rollout.Rollout(nthread=threads if threads > 1 else 0) as pool:
        start = time.perf_counter()
        pool.rollout(
            [model] * n,
            datas,
            init,
            control,
            nstep=nstep,
            state=out_state,
            sensordata=out_sens,
            skip_checks=True,
        )
        elapsed = time.perf_counter() - start
    return n * nstep / elapsed


class RolloutLoop:
    """Control loop built on ``mujoco.rollout``: FULLPHYSICS state in, ``dec`` substeps, state out."""

    def __init__(self, model: mujoco.MjModel, n: int, threads: int, dec: int) -> None:
        self.state0, _ = _stand_state(model)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self.model, self.n, self.dec = model, n, dec
        self.pool = rollout.Rollout(nthread=threads if threads > 1 else 0)
        self.datas = [mujoco.MjData(model) for _ in range(max(1, threads))]
        self.reset()
        self.out_state = np.empty((n, dec, mujoco.mj_stateSize(model, spec)))
        self.out_sens = np.empty((n, dec, model.nsensordata))
        self.control = np.empty((n, dec, model.nu))
        self.models = [model] * n

    def reset(self) -> None:
        """Every world back to the stand keyframe (as the raw reference starts)."""
        self.state = np.ascontiguousarray(np.tile(self.state0, (self.n, 1)))

    def step(self, ctrl: np.ndarray) -> None:
        self.control[:] = ctrl[:, None, :]
        self.pool.rollout(
            self.models, self.datas, self.state, self.control, nstep=self.dec,
            state=self.out_state, sensordata=self.out_sens, skip_checks=True,
        )  # fmt: skip
        self.state = np.ascontiguousarray(self.out_state[:, -1])

    def close(self) -> None:
        self.pool.close()


def _time_loop(step: Callable[[int], object], iters: int, n: int) -> float:
    start = time.perf_counter()
    for k in range(iters):
        step(k)
    return n * iters / (time.perf_counter() - start)


def _backend_step(backend: MujocoBackend, ctrl: torch.Tensor, k: int) -> object:
    return backend.step(ctrl[k])


def _env_step(env: Any, actions: torch.Tensor, k: int) -> object:
    return env.step(actions[k])


def _loop_step(loop: RolloutLoop, ctrl: np.ndarray, k: int) -> None:
    loop.step(ctrl[k])


def _make_task_env(task: str, n: int, threads: int) -> Any:
    from runtime.config import compose
    from runtime.env import make_env

    cfg = compose("sac", task, "mujoco", [f"algo.num_envs={n}", f"training.physics_threads={threads}"])
    return make_env(cfg, seed=0)


def bench_num_envs(
    n: int, threads: int, dec: int, iters: int, rounds: int, tasks: list[str]
) -> dict[str, Any]:
    """Interleaved rounds at ``n`` envs; returns medians of throughputs and of per-round ratios."""
    model = load_model(SCENE)
    ctrl = _controls(model, n, iters, seed=n)
    ctrl_t = torch.from_numpy(ctrl).float()
    stand_q = torch.tensor(model.key("stand").qpos, dtype=torch.float64).repeat(n, 1)
    zeros_v = torch.zeros(n, model.nv, dtype=torch.float64)
    candidates: dict[str, tuple[Callable[[int], object], Callable[[], object], Callable[[], None]]] = {}
    for engine in ("batch", "threads"):
        backend = MujocoBackend(model, n, torch.device("cpu"), dec, num_threads=threads, engine=engine)
        candidates[f"backend:{engine}"] = (
            functools.partial(_backend_step, backend, ctrl_t),
            functools.partial(backend.reset_rows, torch.arange(n), stand_q, zeros_v),
            backend.close,
        )
    loop = RolloutLoop(model, n, threads, dec)
    envs: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for task in tasks:
        try:
            env = _make_task_env(task, n, threads)
        except Exception as exc:  # reported, never replaced by a made-up figure
            skipped[f"env:{task}"] = f"{type(exc).__name__}: {exc}"
            continue
        envs[task] = env
        env.reset()
        gen = torch.Generator().manual_seed(0)
        actions = torch.rand(iters, n, env.action_dim, generator=gen) * 2 - 1
        candidates[f"env:{task}"] = (functools.partial(_env_step, env, actions), env.reset, env.close)
    samples: dict[str, list[float]] = {name: [] for name in ["raw_physics", "raw_long_rollout", *candidates]}
    ratios: dict[str, list[float]] = {name: [] for name in candidates}
    try:
        for step, reset, _ in candidates.values():  # warm-up (thread start, first contacts)
            reset()
            for k in range(3):
                step(k)
        for k in range(3):
            loop.step(ctrl[k])
        for _ in range(rounds):
            samples["raw_long_rollout"].append(raw_rollout(model, n, threads, ctrl, dec))
            loop.reset()
            raw = _time_loop(functools.partial(_loop_step, loop, ctrl), iters, n) * dec
            samples["raw_physics"].append(raw)
            for name, (step, reset, _) in candidates.items():
                reset()
                rate = _time_loop(step, iters, n)
                samples[name].append(rate)
                ratios[name].append(rate / (raw / dec))
    finally:
        loop.close()
        for _, _, close in candidates.values():
            close()
    return {
        "num_envs": n,
        "threads": threads,
        "decimation": dec,
        "iters_per_round": iters,
        "rounds": rounds,
        "median_steps_per_s": {k: statistics.median(v) for k, v in samples.items()},
        "median_ratio_vs_raw": {k: statistics.median(v) for k, v in ratios.items()},
        "skipped": skipped,
        "loadavg_1min_after": os.getloadavg()[0],
        "usable_cpus": available_cpus(),
    }


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh, indent=2)
    os.replace(tmp, path)


@app.command()
def main(
    num_envs: Annotated[str, typer.Option(help="comma-separated env counts")] = "64,256",
    threads: Annotated[int, typer.Option(help="physics threads (0: every usable CPU)")] = 0,
    decimation: Annotated[int, typer.Option(min=1)] = 4,
    iters: Annotated[int, typer.Option(min=1, help="control steps per candidate per round")] = 40,
    rounds: Annotated[int, typer.Option(min=1)] = 3,
    tasks: Annotated[
        str, typer.Option(help="comma-separated tasks for env throughput ('' for none)")
    ] = ",".join(TASKS),
    output: Annotated[Path | None, typer.Option(help="optional absolute JSON output path")] = None,
) -> None:
    """Measure and print backend/env throughput ratios against raw mujoco.rollout."""
    if output is not None and not output.is_absolute():
        typer.echo(f"--output must be an absolute path, got {output}", err=True)
        raise typer.Exit(2)
    try:
        counts = [int(x) for x in num_envs.split(",") if x.strip()]
    except ValueError:
        typer.echo(f"--num-envs must be comma-separated integers, got {num_envs!r}", err=True)
        raise typer.Exit(2) from None
    if not counts or min(counts) < 1:
        typer.echo("--num-envs needs at least one integer >= 1", err=True)
        raise typer.Exit(2)
    task_list = [t for t in tasks.split(",") if t]
    bad = [t for t in task_list if t not in TASKS]
    if bad:
        typer.echo(f"--tasks: unknown {bad}; allowed: {', '.join(TASKS)}", err=True)
        raise typer.Exit(2)
    t = threads or available_cpus()
    results = [bench_num_envs(n, t, decimation, iters, rounds, task_list) for n in counts]
    console = Console()
    for res in results:
        table = Table(
            title=f"G1 at {res['num_envs']} envs, {res['threads']} threads, decimation {res['decimation']}"
        )
        table.add_column("candidate")
        table.add_column("median steps/s", justify="right")
        table.add_column("ratio vs raw/decimation", justify="right")
        for name, rate in res["median_steps_per_s"].items():
            ratio = res["median_ratio_vs_raw"].get(name)
            unit = "physics" if name.startswith("raw_") else "env ctrl"
            table.add_row(name, f"{rate:,.0f} {unit}", "-" if ratio is None else f"{ratio:.3f}")
        for name, reason in res["skipped"].items():
            table.add_row(name, "not measured", reason[:80])
        console.print(table)
    if output is not None:
        _write_json(output, {"benchmark": "backend_throughput", "results": results})
        console.print(f"wrote {output}")


if __name__ == "__main__":
    app()
