"""`soak`: `soak run` (the owner-routed trainer), `soak monitor -- CMD` (any command), `soak report`.

Thin typer wrappers: settings are built and validated here (bad input -> exit 2 before anything is
spawned or written), the trainer's route in ``harness.soak.route``, the work in
``harness.soak.outcome.run_monitor``. Never imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from soakbench.foundation.extras import TRAIN, require
from soakbench.harness.ci.options import JunitXml, SummaryMd
from soakbench.harness.ci.outputs import CiOutputError, CiOutputs
from soakbench.harness.soak.command_options import MonitorOptions, RunOptions, WatchOptions, typer_command
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from soakbench.harness.soak.options import CompareMustSurvive, Live, LiveOpt, MinDuration
from soakbench.harness.soak.outcome import run_monitor
from soakbench.harness.soak.route import (
    TrainRoute,
    check_extra_overrides,
    check_train_config,
    cuda_blocker,
    monitor_cell,
    run_settings,
)
from soakbench.runtime.choices import Sim

EXIT_BAD_INPUT = 2


def _fail(message: str) -> typer.Exit:
    # the message quotes user input verbatim: escape it so "[...]" is never read as Rich markup
    Console(stderr=True).print(f"[bold red]soak: error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def ci_outputs(junit_xml: Path | None, summary_md: Path | None) -> CiOutputs:
    """The checked CI destinations (exit 2 naming the option when one cannot be written)."""
    try:
        return CiOutputs.resolve(junit_xml, summary_md)
    except CiOutputError as exc:
        raise _fail(str(exc)) from None


def _execute(settings: MonitorSettings, ci: CiOutputs | None = None) -> None:
    try:
        code = run_monitor(settings, ci)
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    raise typer.Exit(code)


def run(route_options: RunOptions, shared: MonitorOptions) -> None:
    """Soak the real owner-routed trainer (defaults: the canonical flashsac/g1_motion_tracking/mjwarp
    budget, 1024 envs x 65000 iterations, >= 1800 s)."""
    require(TRAIN, "soak run")  # the trainer it spawns is the training extra's
    extra = list(route_options.extra_override or [])
    try:
        check_extra_overrides(extra)
        route = TrainRoute(
            algo=route_options.algo.value,
            task=route_options.task.value,
            sim=route_options.sim.value,
            num_envs=route_options.num_envs,
            iterations=route_options.iterations,
            log_dir=shared.log_dir,
            extra=tuple(extra),
            nproc_per_node=route_options.nproc_per_node,
            max_restarts=shared.allow_restarts,
        )
        check_train_config(route)
        settings = run_settings(route, shared)
        validate_settings(settings)  # paths and timing before the GPU check: input errors first
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    ci = ci_outputs(shared.junit_xml, shared.summary_md)
    if route_options.sim is Sim.mjwarp:
        blocker = cuda_blocker(extra)
        if blocker is not None:
            raise _fail(blocker)
    _execute(settings, ci)


def monitor(watched: WatchOptions, shared: MonitorOptions) -> None:
    """Watch any COMMAND that writes its progress under --log-dir (criteria needing a run_summary are
    not_applicable unless --run-contract)."""
    try:
        recorded = monitor_cell(watched.cell) if watched.cell is not None else {}
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    settings = shared.settings(
        command=tuple(watched.command),
        mode="monitor",
        run_settings=recorded,
        run_contract=watched.run_contract,
    )
    _execute(settings, ci_outputs(shared.junit_xml, shared.summary_md))


#: `soak demo` budget (measured sizing in docs/soak-design.md, "The demo budget"). The trainer stops at
#: an iteration count, not a time, so the duration depends on the host: with the learner pinned to the cores
#: the physics leaves free, the 2-core dev VM ran 53-75 iterations/s when quiet (8000 in 107 s) and
#: several times fewer when shared. 12000 iterations take about 2.5-3 minutes there; the 30 s floor
#: leaves a host 5x faster still passing. Sampling every 1 s, the 30 trend samples each verdict needs
#: take 48 s after start-up.
DEMO_ITERATIONS = 12000
DEMO_MIN_DURATION_S = 30.0
#: The demo soaks the lifecycle, not learning: one update per iteration, as when this budget was measured,
#: rather than the owner's learning recipe of 8 (which would make the demo about 8x longer).
DEMO_EXTRA_OVERRIDES = ("algo.updates_per_iteration=1",)


def demo_route(log_dir: Path, iterations: int) -> TrainRoute:
    """The trainer `soak demo` spawns: sac / g1_walk_flat / mujoco at 16 envs, lifecycle learning settings."""
    return TrainRoute(
        algo="sac",
        task="g1_walk_flat",
        sim="mujoco",
        num_envs=16,
        iterations=iterations,
        log_dir=log_dir,
        extra=DEMO_EXTRA_OVERRIDES,
    )


def demo(
    reports_dir: Annotated[
        Path, typer.Option("--reports-dir", help="parent of the timestamped soak folder")
    ] = Path("reports/soak"),
    iterations: Annotated[int, typer.Option("--iterations", min=1)] = DEMO_ITERATIONS,
    min_duration_seconds: MinDuration = DEMO_MIN_DURATION_S,
    live: LiveOpt = Live.auto,
) -> None:
    """A short real CPU soak (sac / g1_walk_flat / mujoco, 16 envs x 12000 iterations, >= 30 s; about 2-3
    minutes on a quiet 2-core host, longer on a busy one) into REPORTS_DIR/<UTC timestamp>/, then the
    verdict table."""
    import time

    require(TRAIN, "soak demo")

    folder = reports_dir.resolve() / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise _fail(f"--reports-dir: {folder} already exists; retry in a second") from None
    route = demo_route(folder / "run", iterations)
    options = MonitorOptions(
        log_dir=route.log_dir,
        output=folder / "soak.json",
        min_duration_seconds=min_duration_seconds,
        sample_interval_seconds=1.0,
        startup_timeout_seconds=300.0,
        stale_progress_seconds=120.0,
        post_shutdown_grace_seconds=5.0,
        live=live,
    )
    settings = run_settings(route, options)
    try:
        validate_settings(settings)
    except SettingsError as exc:
        folder.rmdir()  # nothing half-written: the folder is still empty
        raise _fail(str(exc)) from None
    _execute(settings)


def report(artifact: Annotated[Path, typer.Argument(help="a soak artifact (.json)")]) -> None:
    """Render the HTML report beside ARTIFACT."""
    from soakbench.harness.soak.evidence.report import report_command

    raise typer.Exit(report_command(artifact))


def compare(  # noqa: PLR0913 — typer declares one parameter per CLI option
    base: Annotated[Path, typer.Argument(help="the baseline soak artifact (.json)")],
    new: Annotated[Path, typer.Argument(help="the soak artifact to judge against it")],
    threshold: float = typer.Option(0.05, "--threshold", help="minimum effect size (0.05 = 5 %)"),
    must_survive: CompareMustSurvive = None,
    allow_cross_host: bool = typer.Option(False, "--allow-cross-host", help="compare across hosts"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="exit 1 if any is worse"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON report on stdout (table: stderr)"),
    json_file: str | None = typer.Option(None, "--json-file", help="absolute path of a JSON report to write"),
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
) -> None:
    """Verdict per measure between two soaks of one workload: faster | slower | no_change | inconclusive."""
    from soakbench.harness.soak.two_soaks_cli import CompareOptions, compare_command

    options = CompareOptions(
        threshold=threshold,
        must_survive_s=must_survive,
        allow_cross_host=allow_cross_host,
        fail_on_regression=fail_on_regression,
        as_json=as_json,
        json_file=json_file,
        ci=ci_outputs(junit_xml, summary_md),
    )
    raise typer.Exit(compare_command((base, new), options))


def cleanup() -> None:
    """Stop what dead soak monitors left running, and remove their /dev/shm segments: only processes and
    segments their ownership records prove (pid + start ticks, or the run's token; name + inode)."""
    from soakbench.harness.soak.loop.leftovers import LeftoverError, clean, describe, find_leftovers

    try:
        leftovers = find_leftovers()
    except LeftoverError as exc:
        raise _fail(str(exc)) from None
    for left in leftovers:
        clean(left.path, left.record)
    print(f"stopped:\n{describe(leftovers)}" if leftovers else "nothing left by a dead soak monitor")


def build_app() -> typer.Typer:
    """The `soak` typer app."""
    from soakbench.harness.soak.merge_cli import merge_command

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True)
    # `soak run` soaks a full training budget by default; `soak monitor` watches whatever it is given
    app.command("run")(typer_command(run, (RunOptions, MonitorOptions), {"min_duration_seconds": 1800.0}))
    app.command("monitor")(typer_command(monitor, (WatchOptions, MonitorOptions)))
    app.command("report")(report)
    app.command("compare")(compare)
    app.command("demo")(demo)
    app.command("cleanup")(cleanup)
    app.command("merge")(merge_command)
    return app


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    return build_app()(args=argv, prog_name="soak")


if __name__ == "__main__":
    main()
