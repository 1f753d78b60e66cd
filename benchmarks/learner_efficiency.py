"""Learner efficiency: how close each learner's update runs to this host's matrix-product rate.

For each learner at its owner CPU sizes (the composed ``mujoco`` config, one torch thread), on a replay
filled with random rows:

- FLOP per update, counted by ``torch.utils.flop_counter.FlopCounterMode`` over real updates;
- ms per update: the median of ``--repeats`` timed runs of ``--updates`` calls of ``Learner.update()``;
- the limit: the rate of the update's own largest matrix product (the shape recorded while counting),
  timed alone in this process;
- the efficiency: achieved FLOP/s ÷ that limit;
- the share of the update's wall time spent inside matrix products (``torch.profiler``: the self time
  of ``aten::mm``, ``addmm``, ``bmm`` and ``baddbmm``), and everything else;
- the compile time, when the learner compiles (its runtime diagnostics say whether, and why not).

Each figure is a ratio of two measurements taken in this run, so it transfers between hosts where the
milliseconds do not (this host is shared and noisy).

    uv run --frozen python benchmarks/learner_efficiency.py
    uv run --frozen python benchmarks/learner_efficiency.py --learners sac --repeats 7 --json
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import typer

# The learners' owner recipes: (algo, task) whose composed CPU config sets the sizes.
RECIPES: dict[str, tuple[str, str]] = {
    "sac": ("sac", "g1_walk_flat"),
    "flashsac": ("flashsac", "g1_motion_tracking"),
}
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


@dataclass(frozen=True)
class LearnerEfficiency:
    """One learner's figures (every one measured in this run)."""

    learner: str
    task: str
    batch_size: int
    flop_per_update: float
    ms_per_update: float
    limit_gflops: float
    limit_shape: str
    achieved_gflops: float
    efficiency: float
    matmul_share: float
    other_share: float
    compile: str


def largest_matmul_shape(run: Callable[[], object]) -> tuple[str, tuple[int, ...]]:
    """(op, (batch, m, k, n)) of the largest matrix product ``run`` makes, by FLOP."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    found: dict[tuple[str, tuple[int, ...]], int] = {}

    class Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            shape = _product_shape(func, args, aten)
            if shape is not None:
                found[(func.__name__, shape)] = 2 * shape[0] * shape[1] * shape[2] * shape[3]
            return func(*args, **(kwargs or {}))

    with Recorder():  # type: ignore[no-untyped-call]
        run()
    if not found:
        raise SystemExit("learner_efficiency: the update made no matrix product")
    return max(found, key=found.__getitem__)


def _product_shape(func: Any, args: tuple[Any, ...], aten: Any) -> tuple[int, int, int, int] | None:
    """(batch, m, k, n) of a matrix-product op, None for any other op."""
    if func in (aten.mm.default, aten.addmm.default):
        a, b = (args[0], args[1]) if func is aten.mm.default else (args[1], args[2])
        return 1, a.shape[0], a.shape[1], b.shape[1]
    if func in (aten.bmm.default, aten.baddbmm.default):
        a, b = (args[0], args[1]) if func is aten.bmm.default else (args[1], args[2])
        return a.shape[0], a.shape[1], a.shape[2], b.shape[2]
    return None


def matmul_rate_gflops(shape: tuple[int, ...], seconds: float = 0.5) -> float:
    """GFLOP/s of one (batch, m, k, n) product timed alone: the best of five timed windows."""
    import torch

    batch, m, k, n = shape
    a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
    out = torch.empty(batch, m, n)
    flop = 2 * batch * m * k * n
    best = 0.0
    for _ in range(5):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 5:
            torch.bmm(a, b, out=out) if batch > 1 else torch.mm(a[0], b[0], out=out[0])
            calls += 1
        best = max(best, calls * flop / (time.perf_counter() - start))
    return best / 1e9


def build_filled(algo: str, task: str) -> Any:
    """The learner of ``algo``/``task``'s composed config on CPU, its replay filled with random rows."""
    import torch

    from soakbench.runtime.config import compose
    from soakbench.runtime.env import make_env
    from soakbench.runtime.learners import build_learner

    composed = compose(algo, task, "mujoco", ["algo.num_envs=1"])
    env = make_env(composed)  # the task's dimensions only
    obs_dim, act_dim = env.obs_dim, env.action_dim
    env.close()
    cfg = composed.algo
    learner = build_learner(cfg, obs_dim, act_dim, torch.device("cpu"), seed=0)
    rows = max(cfg.batch_size, cfg.learning_starts)
    learner.add_transitions(
        torch.randn(rows, obs_dim),
        torch.rand(rows, act_dim) * 2 - 1,
        torch.randn(rows),
        torch.randn(rows, obs_dim),
        torch.rand(rows) < 0.02,
    )
    return learner


def flop_per_update(learner: Any) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        learner.update()
    per_update: float = float(counter.get_total_flops()) / int(learner.updates_per_iteration)
    return per_update


def ms_per_update(learner: Any, updates: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(updates):
            learner.update()
        samples.append((time.perf_counter() - start) / (updates * learner.updates_per_iteration))
    return 1e3 * float(statistics.median(samples))


def matmul_share(learner: Any, updates: int) -> float:
    """The share of the profiled updates' wall time spent in matrix products' own (self) time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(updates):
            learner.update()
        wall_us = 1e6 * (time.perf_counter() - start)
    matmul_us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMUL_OPS)
    return float(matmul_us) / wall_us


def compile_note(learner: Any) -> str:
    """The learner's own torch.compile decision (its runtime diagnostics record no compile time)."""
    decision = learner.runtime_diagnostics()["torch_compile"]
    return "compiled" if decision["enabled"] else f"none ({decision['disable_reason']})"


def measure(name: str, updates: int, repeats: int) -> LearnerEfficiency:
    algo, task = RECIPES[name]
    learner = build_filled(algo, task)
    learner.update()  # warm-up: first-call allocations and dispatch caches
    flop = flop_per_update(learner)
    op, shape = largest_matmul_shape(learner.update)
    ms = ms_per_update(learner, updates, repeats)
    limit = matmul_rate_gflops(shape)
    achieved = flop / (ms / 1e3) / 1e9
    share = matmul_share(learner, updates)
    return LearnerEfficiency(
        learner=name,
        task=task,
        batch_size=learner.batch_size,
        flop_per_update=flop,
        ms_per_update=ms,
        limit_gflops=limit,
        limit_shape=f"{op} " + "x".join(str(d) for d in shape),
        achieved_gflops=achieved,
        efficiency=achieved / limit,
        matmul_share=share,
        other_share=1.0 - share,
        compile=compile_note(learner),
    )


def table(rows: list[LearnerEfficiency]) -> str:
    head = "learner   batch  MFLOP/upd  ms/upd  achieved GF/s  limit GF/s  efficiency  matmul  other  compile"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.learner:<9} {r.batch_size:>5}  {r.flop_per_update / 1e6:>9.0f}  {r.ms_per_update:>6.1f}  "
            f"{r.achieved_gflops:>13.2f}  {r.limit_gflops:>10.2f}  {r.efficiency:>10.2f}  "
            f"{r.matmul_share:>6.2f}  {r.other_share:>5.2f}  {r.compile}"
        )
    lines += [f"limit of {r.learner}: {r.limit_shape} (batch x m x k x n), timed alone" for r in rows]
    return "\n".join(lines)


def main(
    learners: Annotated[list[str] | None, typer.Option(help="sac and/or flashsac (default: both)")] = None,
    updates: Annotated[int, typer.Option(min=1, help="update() calls per timed run")] = 10,
    repeats: Annotated[int, typer.Option(min=1, help="timed runs; the median is reported")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document, nothing else")] = False,
) -> None:
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's own start/stop chatter on stderr
    import torch

    names = learners or list(RECIPES)
    unknown = sorted(set(names) - set(RECIPES))
    if unknown:
        raise typer.BadParameter(f"unknown learner {', '.join(unknown)}; allowed: {', '.join(RECIPES)}")
    torch.set_num_threads(1)
    rows = [measure(name, updates, repeats) for name in names]
    if as_json:
        print(json.dumps({"threads": 1, "learners": [asdict(r) for r in rows]}, indent=2))
    else:
        print(table(rows))


if __name__ == "__main__":
    typer.run(main)
