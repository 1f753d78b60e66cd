"""The owner-routed trainer `soak run` spawns: its route, the overrides and the command it is given, and
the checks that refuse a route before anything is spawned or written. Never imports torch."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.foundation.cells import CELL_FORMAT, parse_cell
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError

if TYPE_CHECKING:
    from soakbench.harness.soak.command_options import MonitorOptions

#: keys `soak run` owns; an --extra-override of any of them is rejected (leading +/~ ignored)
OWNED_KEYS: dict[str, str] = {
    "algo": "--algo",
    "algo.name": "--algo",
    "task": "--task",
    "task.name": "--task",
    "sim": "--sim",
    "training.sim_backend": "--sim",
    "training.no_play": "play mode (always true in a soak)",
    "log_dir": "--log-dir",
    "algo.num_envs": "--num-envs",
    "algo.max_iterations": "--iterations",
}


def check_extra_overrides(overrides: list[str]) -> None:
    """Reject malformed or owned ``--extra-override`` values (SettingsError names the value)."""
    for item in overrides:
        key, sep, _value = item.partition("=")
        key = key.strip().lstrip("+~")
        if not sep or not key:
            raise SettingsError(f"--extra-override {item!r}: must be dotted.key=value")
        if key in OWNED_KEYS or key == "owner" or key.startswith("owner."):
            owner = OWNED_KEYS.get(key, "the owner route")
            raise SettingsError(
                f"--extra-override {item!r}: {key} is owned by `soak run` ({owner}); set it there instead"
            )


@dataclass(frozen=True)
class TrainRoute:
    """The owner-routed trainer `soak run` spawns: its route, its budget, its run directory and the free
    ``--extra-override`` values."""

    algo: str
    task: str
    sim: str
    num_envs: int
    iterations: int
    log_dir: Path
    extra: tuple[str, ...] = ()
    nproc_per_node: int = 1  # ranks: above 1, torchrun starts the trainer once per rank
    max_restarts: int = 0  # torchrun's --max-restarts (soak run --allow-restarts)


def train_overrides(route: TrainRoute) -> list[str]:
    """The ``dotted.key=value`` overrides `soak run` passes to `train`. ``log_dir`` goes as a YAML
    double-quoted string (JSON escaping), so a path holding ``: `` or `` #`` stays exactly that path."""
    return [
        f"algo.num_envs={route.num_envs}",
        f"algo.max_iterations={route.iterations}",
        "training.no_play=true",
        f"log_dir={json.dumps(str(route.log_dir))}",
        *route.extra,
    ]


def check_train_config(route: TrainRoute) -> None:
    """Compose the trainer's configuration from the very overrides `train` will get (no torch import):
    a bad value in ``--extra-override``, ``--num-envs`` or ``--iterations`` fails here, before anything
    is spawned or written. Host prerequisites and the task's files are still the trainer's to check."""
    from soakbench.runtime.config import ConfigError, compose

    try:
        cfg = compose(route.algo, route.task, route.sim, train_overrides(route))
    except ConfigError as exc:
        raise SettingsError(f"the trainer's configuration is invalid: {exc}") from None
    if cfg.log_dir != str(route.log_dir):  # the monitor must watch the folder the trainer writes
        raise SettingsError(f"--log-dir {route.log_dir} would reach the trainer as {cfg.log_dir!r}")


def train_command(route: TrainRoute) -> list[str]:
    """The owner-routed `train` command `soak run` spawns: the trainer itself, or torchrun (the elastic
    agent, on this host alone) starting it once per rank."""
    launcher = [sys.executable]
    if route.nproc_per_node > 1:
        launcher += [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(route.nproc_per_node),
            "--max-restarts",
            str(route.max_restarts),
        ]
    return [
        *launcher,
        "-m",
        "soakbench.runtime.cli",
        "--algo",
        route.algo,
        "--task",
        route.task,
        "--sim",
        route.sim,
        *train_overrides(route),
    ]


def run_settings(route: TrainRoute, options: MonitorOptions) -> MonitorSettings:
    """Monitor settings of a `soak run` of the owner-routed trainer; every other field from ``options``
    (whose ``log_dir`` is the route's). The trainer's checkpoint folder is watched on disk by itself,
    before any ``--watch-path``: checkpoints are what fills a disk over days."""
    checkpoints = Path(route.log_dir) / "checkpoints"
    options = replace(options, watch_path=[checkpoints, *(options.watch_path or ())])
    return options.settings(
        command=tuple(train_command(route)),
        mode="run",
        max_iterations=route.iterations,
        run_settings={
            "algo": route.algo,
            "task": route.task,
            "sim": route.sim,
            "num_envs": route.num_envs,
            "iterations": route.iterations,
            "extra_overrides": list(route.extra),
            # a single-rank artifact stays as it was; a job of several ranks says how many
            **({"nproc_per_node": route.nproc_per_node} if route.nproc_per_node > 1 else {}),
        },
    )


def cuda_blocker(extra: list[str]) -> str | None:
    """Why an mjwarp soak cannot run here, or None. Checked through NVML (no torch in the monitor).

    ``training.mjwarp_device=cpu`` is the explicit diagnostic lane and needs no GPU.
    """
    if any(item.replace(" ", "") == "training.mjwarp_device=cpu" for item in extra):
        return None
    from soakbench.foundation.nvml import gpu_snapshot

    snap = gpu_snapshot()
    if snap["available"]:
        return None
    return (
        f"--sim mjwarp needs a CUDA GPU and none is usable here ({snap['reason']}). "
        "For a CPU soak use `--sim mujoco`; `--extra-override training.mjwarp_device=cpu` is the explicit "
        "MJWarp CPU diagnostic lane (never production evidence)."
    )


def monitor_cell(text: str) -> dict[str, Any]:
    """The ``run_settings`` of a `soak monitor --cell` run: ``{"cell": {algo, task, backend[, ranks]}}``
    from ``ALGO/TASK/BACKEND`` (``/ranks=N`` appended for a job of N >= 2 ranks; one rank is written
    without it, as a test marker's ``cell`` property is). A malformed value is a SettingsError naming
    --cell and the allowed form."""
    parsed = parse_cell(text)
    if parsed is None:
        raise SettingsError(f"--cell {text!r}: must be {CELL_FORMAT}")
    algo, task, backend, ranks = parsed
    cell: dict[str, Any] = {"algo": algo, "task": task, "backend": backend}
    return {"cell": {**cell, **({"ranks": ranks} if ranks > 1 else {})}}
