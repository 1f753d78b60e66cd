"""`train`: owner-routed training entry point. A thin wrapper over compose -> validate -> run_training."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from soakbench.foundation.roles import mark_process
from soakbench.runtime.choices import Algo, Sim, Task
from soakbench.runtime.config import (
    ComposedConfig,
    ConfigError,
    G1MotionTrackingConfig,
    PlatformFacts,
    RunConfig,
    compose,
    platform_blockers,
    process_sharing_environment,
    resolve_learner_device,
    validate_for_run,
)
from soakbench.runtime.distributed import (
    RankIdentity,
    check_job_dir,
    check_placement,
    rank_device_mask,
    rank_identity,
    rank_overrides,
)

EXIT_CONFIG_ERROR = 2


def effective_settings_table(cfg: ComposedConfig, facts: PlatformFacts) -> Table:
    """The rows an operator checks before a long run, as a rich table."""
    table = Table(title=f"Effective settings: {cfg.owner.algo} / {cfg.owner.task} / {cfg.owner.sim}")
    table.add_column("setting")
    table.add_column("value")
    blockers = platform_blockers(cfg, facts)
    rows = [
        ("Owner chain", " -> ".join(cfg.owner.chain)),
        ("Task semantic name", cfg.task.semantic_name),
        ("Backend identity", cfg.training.sim_backend),
        ("Inference slots", f"training.inference_slot_capacity={cfg.training.inference_slot_capacity}"),
        ("Replay-ingress depth", f"training.replay_ingress_depth={cfg.training.replay_ingress_depth}"),
        (
            "Replay-ingress slot rows",
            f"{cfg.resolved.replay_ingress_slot_rows} (training.replay_ingress_slot_rows="
            f"{_show(cfg.training.replay_ingress_slot_rows)})",
        ),
        (
            "Collector metrics interval",
            f"training.collector_metrics_interval={cfg.training.collector_metrics_interval}",
        ),
        ("CUDA process sharing", f"training.cuda_process_sharing={_show(cfg.training.cuda_process_sharing)}"),
        ("Scene", f"runtime/assets/{cfg.task.scene}"),
        ("Motion", _motion(cfg)),
        ("Environments x iterations", f"{cfg.algo.num_envs} x {cfg.algo.max_iterations}"),
        (
            "Learner device",
            f"{resolve_learner_device(cfg, facts)} (training.learner_device={cfg.training.learner_device})",
        ),
        ("Platform prerequisites", "met" if not blockers else f"UNMET: {blockers[0]}"),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    return table


def _motion(cfg: ComposedConfig) -> str:
    task = cfg.task
    return f"runtime/assets/{task.motion}" if isinstance(task, G1MotionTrackingConfig) else "none"


def _show(value: object) -> str:
    return "null" if value is None else str(value)


def train(
    algo: Annotated[Algo, typer.Option(help="learner entry point")],
    task: Annotated[Task, typer.Option(help="task owner")],
    sim: Annotated[Sim, typer.Option(help="physics backend owner")],
    overrides: Annotated[list[str] | None, typer.Argument(help="dotted.key=value settings")] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="print effective settings and exit")
    ] = False,
) -> None:
    """Train with the owner configuration selected by --algo/--task/--sim."""
    err = Console(stderr=True)
    try:
        identity = rank_identity(os.environ)
        cfg = compose(algo.value, task.value, sim.value, overrides or [])
        if identity is not None:
            extra = rank_overrides(identity, cfg, os.cpu_count() or 1)
            cfg = compose(algo.value, task.value, sim.value, [*(overrides or []), *extra])
        # MPS clients bind to the daemon when CUDA initializes, and a rank masks its devices before
        # CUDA initializes, so in both cases detection must not initialize it.
        initialize = cfg.training.cuda_process_sharing != "mps" and identity is None
        facts = PlatformFacts.detect(initialize_cuda=initialize)
        if print_config:
            Console().print(effective_settings_table(cfg, facts))
            raise typer.Exit(0)
        run_cfg = check_run(cfg, facts, identity)
    except ConfigError as exc:
        err.print(f"[bold red]train: configuration error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_CONFIG_ERROR) from None
    os.environ.update(process_sharing_environment(run_cfg))  # inherited by the spawned collector too

    from soakbench.runtime.manager.trainer import run_training  # heavy imports only for a real run

    mark_process("trainer")  # the soak monitor reads this role from /proc/<pid>/comm

    raise typer.Exit(run_training(run_cfg, ranks=identity))


def check_run(cfg: ComposedConfig, facts: PlatformFacts, identity: RankIdentity | None) -> RunConfig:
    """The host checks of this process, then, for a rank, its job folder and its one device.

    A rank's placement is checked first: the multi-GPU gate of MPS must refuse before any daemon is looked
    up, and each rank of a multi-GPU job sees several devices until it is given its own. A rank computes
    on CUDA when its learner or its physics does."""
    if identity is None:
        return validate_for_run(cfg, facts)
    learner = resolve_learner_device(cfg, facts)
    device = "cuda" if "cuda" in (learner, cfg.resolved.physics_device) else learner
    check_placement(identity, device, cfg.training.cuda_process_sharing, facts)
    run_cfg = validate_for_run(cfg, facts, as_rank=True)
    check_job_dir(identity.job_directory(Path(str(run_cfg.log_dir))), identity.restart_count)
    if device == "cuda":
        # before CUDA initializes, so that ``cuda`` means this rank's device in it and its collector
        os.environ["CUDA_VISIBLE_DEVICES"] = rank_device_mask(identity, os.environ)
    return run_cfg


def main() -> None:
    """Console-script entry point."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(train)
    app(prog_name="train")


if __name__ == "__main__":
    main()
