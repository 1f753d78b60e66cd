"""Backend throughput benchmark: MuJoCo CPU host bridge against the raw ``mujoco.rollout`` limit.

All figures come from ONE process and are measured in interleaved rounds (raw, backend engines, env,
raw, ...), so each round's ratio compares measurements taken seconds apart on the same (noisy) host.
The reported figure is the median over rounds. Nothing is asserted: this prints ratios.

    uv run --frozen python scripts/benchmark/backend_throughput.py --num-envs 64,256 --threads 2

Per ``num_envs`` and task (decimation and action scale read from the composed ``sac`` owner config of
that task on ``mujoco``, so the raw controls move the joints as far as the task's actions do) it reports:
  raw_physics              the physics-limit reference: mujoco.rollout on a persistent Rollout pool of
                           T threads, nstep=decimation per call, FULLPHYSICS state fed back, stand
                           targets + uniform(-action_scale, action_scale) noise per control step
                           (what a random policy does), clipped to the actuator range; no torch
  backend:<engine>         MujocoBackend control steps x N per second on the same controls
  env:<task>               TaskEnv.step via make_env (obs, reward, resets included), random actions
  ratio = steps/s / (raw physics steps/s / decimation)   (target >= 0.7 at 256 envs, 2 cores)
Torch runs with ``--torch-threads`` intra-op threads (default 1, as the trainer's collector).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import mujoco
import numpy as np
import torch
import typer
from mujoco import rollout
from rich.console import Console
from rich.table import Table

from soakbench.foundation.atomic import write_atomic
from soakbench.runtime.assets import load_model
from soakbench.runtime.backends.mujoco import MujocoBackend, available_cpus

TASKS = ("g1_walk_flat", "g1_motion_tracking")
ENGINES = ("batch", "threads")
# The trainer's collector runs torch single-threaded (TrainerHooks.collector_torch_threads): intra-op
# workers compete with the physics threads for the cores.
COLLECTOR_TORCH_THREADS = 1
app = typer.Typer(add_completion=False, help=__doc__)


def _controls(model: mujoco.MjModel, num_envs: int, steps: int, scale: float, seed: int) -> np.ndarray:
    """[steps, N, nu] stand targets + uniform(-scale, scale) rad noise, clipped to the actuator range,
    like a random policy through ``TaskEnv.step``."""
    rng = np.random.default_rng(seed)
    stand = model.key("stand").ctrl
    ctrl = stand + scale * rng.uniform(-1.0, 1.0, (steps, num_envs, model.nu))
    clipped: np.ndarray = np.clip(ctrl, model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1])
    return clipped


def _stand_state(model: mujoco.MjModel) -> np.ndarray:
    """FULLPHYSICS state [nstate] of the ``stand`` keyframe after ``mj_forward``."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    mujoco.mj_forward(model, data)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    return state


class RolloutLoop:
    """Control loop built on ``mujoco.rollout``: FULLPHYSICS state in, ``dec`` substeps, state out."""

    def __init__(self, model: mujoco.MjModel, n: int, threads: int, dec: int) -> None:
        self.state0 = _stand_state(model)
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


def bench_task(
    n: int, threads: int, task: str, engines: list[str], iters: int, rounds: int
) -> dict[str, Any]:
    """Interleaved rounds of ``task`` at ``n`` envs; returns medians of throughputs and of per-round
    ratios against ``raw_physics`` driven with the task's decimation and action scale."""
    from soakbench.runtime.config import compose
    from soakbench.runtime.env import make_env

    cfg = compose("sac", task, "mujoco", [f"algo.num_envs={n}", f"training.physics_threads={threads}"])
    dec, scale = int(cfg.task.decimation), float(cfg.task.action_scale)
    model = load_model(str(cfg.task.scene))
    ctrl = _controls(model, n, iters, scale, seed=n)
    ctrl_t = torch.from_numpy(ctrl).float()
    stand_q = torch.tensor(model.key("stand").qpos, dtype=torch.float64).repeat(n, 1)
    zeros_v = torch.zeros(n, model.nv, dtype=torch.float64)
    candidates: dict[str, tuple[Callable[[int], object], Callable[[], object], Callable[[], None]]] = {}
    loop = RolloutLoop(model, n, threads, dec)
    skipped: dict[str, str] = {}
    try:
        for engine in engines:
            backend = MujocoBackend(model, n, torch.device("cpu"), dec, num_threads=threads, engine=engine)
            candidates[f"backend:{engine}"] = (
                functools.partial(_backend_step, backend, ctrl_t),
                functools.partial(backend.reset_rows, torch.arange(n), stand_q, zeros_v),
                backend.close,
            )
        try:
            env = make_env(cfg, seed=0)
        except Exception as exc:  # reported, never replaced by a made-up figure
            skipped[f"env:{task}"] = f"{type(exc).__name__}: {exc}"
        else:
            gen = torch.Generator().manual_seed(0)
            actions = torch.rand(iters, n, env.action_dim, generator=gen) * 2 - 1
            candidates[f"env:{task}"] = (functools.partial(_env_step, env, actions), env.reset, env.close)
        samples: dict[str, list[float]] = {name: [] for name in ["raw_physics", *candidates]}
        ratios: dict[str, list[float]] = {name: [] for name in candidates}
        for step, reset, _ in candidates.values():  # warm-up (thread start, first contacts)
            reset()
            for k in range(3):
                step(k)
        for k in range(3):
            loop.step(ctrl[k])
        for _ in range(rounds):
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
        "task": task,
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "decimation": dec,
        "action_scale": scale,
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
    write_atomic(path, json.dumps(payload, indent=2))


def _fail(message: str) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(2)


def _choices(flag: str, text: str, allowed: tuple[str, ...], at_least_one: bool) -> list[str]:
    """Comma-separated ``text`` restricted to ``allowed``, else exit 2 naming ``flag``."""
    chosen = [x for x in text.split(",") if x]
    bad = [x for x in chosen if x not in allowed]
    if bad:
        _fail(f"{flag}: unknown {bad}; allowed: {', '.join(allowed)}")
    if at_least_one and not chosen:
        _fail(f"{flag} needs at least one of {', '.join(allowed)}")
    return chosen


def _env_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        _fail(f"--num-envs must be comma-separated integers, got {text!r}")
    if not counts or min(counts) < 1:
        _fail("--num-envs needs at least one integer >= 1")
    return counts


def _print_result(console: Console, res: dict[str, Any]) -> None:
    table = Table(
        title=f"{res['task']} at {res['num_envs']} envs, {res['threads']} physics / "
        f"{res['torch_threads']} torch threads, decimation {res['decimation']}, "
        f"action scale {res['action_scale']}"
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


@app.command()
def main(  # noqa: PLR0913 — one parameter per command-line option (typer)
    num_envs: Annotated[str, typer.Option(help="comma-separated env counts")] = "64,256",
    threads: Annotated[int, typer.Option(min=0, help="physics threads (0: every usable CPU)")] = 0,
    torch_threads: Annotated[
        int, typer.Option(min=1, help="torch intra-op threads (default: the collector's 1)")
    ] = COLLECTOR_TORCH_THREADS,
    engines: Annotated[str, typer.Option(help="comma-separated MujocoBackend engines")] = ",".join(ENGINES),
    iters: Annotated[int, typer.Option(min=1, help="control steps per candidate per round")] = 40,
    rounds: Annotated[int, typer.Option(min=1)] = 3,
    tasks: Annotated[
        str, typer.Option(help="comma-separated tasks (each sets decimation and action scale)")
    ] = ",".join(TASKS),
    output: Annotated[Path | None, typer.Option(help="optional absolute JSON output path")] = None,
) -> None:
    """Measure and print backend/env throughput ratios against raw mujoco.rollout."""
    if output is not None and not output.is_absolute():
        _fail(f"--output must be an absolute path, got {output}")
    counts = _env_counts(num_envs)
    task_list = _choices("--tasks", tasks, TASKS, at_least_one=True)
    engine_list = _choices("--engines", engines, ENGINES, at_least_one=False)
    torch.set_num_threads(torch_threads)
    t = threads or available_cpus()
    results = [bench_task(n, t, task, engine_list, iters, rounds) for n in counts for task in task_list]
    console = Console()
    for res in results:
        _print_result(console, res)
    if output is not None:
        _write_json(output, {"benchmark": "backend_throughput", "results": results})
        console.print(f"wrote {output}")


if __name__ == "__main__":
    app()
