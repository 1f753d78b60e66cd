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

from foundation.cells import CELL_FORMAT
from harness.ci.options import JunitXml, SummaryMd
from harness.ci.outputs import CiOutputError, CiOutputs
from harness.soak.host.forensics import ForensicsSettings
from harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from harness.soak.options import (
    AllowRestarts,
    AllowSignalDeath,
    DriftGate,
    GpuThrottleGate,
    Grace,
    Interval,
    Live,
    LiveOpt,
    LogDir,
    MinDuration,
    NoStacks,
    Output,
    ProgressEvery,
    PySpy,
    QuietProgress,
    SamplerKind,
    SamplerOpt,
    ShmAttribution,
    ShmOpt,
    ShutdownTimeout,
    Stale,
    Startup,
    TermGrace,
    TrendSamples,
)
from harness.soak.outcome import run_monitor
from harness.soak.route import (
    TrainRoute,
    check_extra_overrides,
    check_train_config,
    cuda_blocker,
    monitor_cell,
    run_settings,
)
from harness.soak.verdicts.observation import DEFAULT_MIN_TREND_SAMPLES
from runtime.choices import Algo, Sim, Task

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


def _monitor_fields(  # noqa: PLR0913 — the options `soak run` and `soak monitor` share, one each
    output: Path,
    min_duration_s: float,
    sample_interval_s: float,
    startup_timeout_s: float,
    stale_progress_s: float,
    post_shutdown_grace_s: float,
    termination_grace_s: float,
    live: Live,
    shm_attribution: ShmAttribution,
    min_trend_samples: int,
    fail_on_throughput_drift: bool,
    forensics: ForensicsSettings,
    sampler: SamplerKind = SamplerKind.auto,
    progress_every_s: float | None = None,
    fail_on_gpu_throttle: bool = False,
    allow_restarts: int = 0,
    allow_signal_deaths: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The MonitorSettings fields `soak run` and `soak monitor` take from the same options."""
    return {
        "allow_restarts": allow_restarts,
        "allow_signal_deaths": allow_signal_deaths,
        "progress_every_s": progress_every_s,
        "forensics": forensics,
        "min_trend_samples": min_trend_samples,
        "fail_on_throughput_drift": fail_on_throughput_drift,
        "fail_on_gpu_throttle": fail_on_gpu_throttle,
        "output": output,
        "min_duration_s": min_duration_s,
        "sample_interval_s": sample_interval_s,
        "startup_timeout_s": startup_timeout_s,
        "stale_progress_s": stale_progress_s,
        "post_shutdown_grace_s": post_shutdown_grace_s,
        "termination_grace_s": termination_grace_s,
        "live": live.value,
        "shm_attribution": shm_attribution.value,
        "sampler": sampler.value,
    }


def _forensics(shutdown_timeout_s: float, no_stacks: bool, py_spy: Path | None) -> ForensicsSettings:
    return ForensicsSettings(shutdown_timeout_s, stacks=not no_stacks, py_spy=py_spy)


def run(  # noqa: PLR0913 — typer declares one parameter per CLI option
    log_dir: LogDir,
    output: Output,
    num_envs: Annotated[int, typer.Option("--num-envs", min=1)] = 1024,
    iterations: Annotated[int, typer.Option("--iterations", min=1)] = 65000,
    min_duration_seconds: MinDuration = 1800.0,
    sample_interval_seconds: Interval = 5.0,
    startup_timeout_seconds: Startup = 900.0,
    stale_progress_seconds: Stale = 300.0,
    post_shutdown_grace_seconds: Grace = 10.0,
    termination_grace_seconds: TermGrace = 20.0,
    extra_override: Annotated[
        list[str] | None, typer.Option("--extra-override", help="dotted.key=value passed to train")
    ] = None,
    algo: Annotated[Algo, typer.Option("--algo")] = Algo.flashsac,
    task: Annotated[Task, typer.Option("--task")] = Task.g1_motion_tracking,
    sim: Annotated[Sim, typer.Option("--sim")] = Sim.mjwarp,
    live: LiveOpt = Live.auto,
    shm_attribution: ShmOpt = ShmAttribution.host,
    min_trend_samples: TrendSamples = DEFAULT_MIN_TREND_SAMPLES,
    fail_on_throughput_drift: DriftGate = False,
    fail_on_gpu_throttle: GpuThrottleGate = False,
    shutdown_timeout_seconds: ShutdownTimeout = 120.0,
    no_stacks: NoStacks = False,
    py_spy: PySpy = None,
    sampler: SamplerOpt = SamplerKind.auto,
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
    quiet_progress: QuietProgress = False,
    progress_every: ProgressEvery = 60.0,
    allow_restarts: AllowRestarts = 0,
    allow_signal_death: AllowSignalDeath = None,
    nproc_per_node: Annotated[
        int,
        typer.Option(
            "--nproc-per-node", min=1, max=64, help="ranks: above 1, torchrun runs the trainer once per rank"
        ),
    ] = 1,
) -> None:
    """Soak the real owner-routed trainer (defaults: the canonical flashsac/g1_motion_tracking/mjwarp
    budget, 1024 envs x 65000 iterations, >= 1800 s)."""
    extra = list(extra_override or [])
    try:
        check_extra_overrides(extra)
        route = TrainRoute(
            algo.value,
            task.value,
            sim.value,
            num_envs,
            iterations,
            log_dir,
            tuple(extra),
            nproc_per_node,
            allow_restarts,
        )
        check_train_config(route)
        settings = run_settings(
            route,
            **_monitor_fields(
                output,
                min_duration_seconds,
                sample_interval_seconds,
                startup_timeout_seconds,
                stale_progress_seconds,
                post_shutdown_grace_seconds,
                termination_grace_seconds,
                live,
                shm_attribution,
                min_trend_samples,
                fail_on_throughput_drift,
                _forensics(shutdown_timeout_seconds, no_stacks, py_spy),
                sampler,
                progress_every if quiet_progress else None,
                fail_on_gpu_throttle,
                allow_restarts,
                tuple(allow_signal_death or ()),
            ),
        )
        validate_settings(settings)  # paths and timing before the GPU check: input errors first
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    ci = ci_outputs(junit_xml, summary_md)
    if sim is Sim.mjwarp:
        blocker = cuda_blocker(extra)
        if blocker is not None:
            raise _fail(blocker)
    _execute(settings, ci)


def monitor(  # noqa: PLR0913 — typer declares one parameter per CLI option
    command: Annotated[list[str], typer.Argument(help="the command to run and watch, after `--`")],
    log_dir: LogDir,
    output: Output,
    min_duration_seconds: MinDuration = 0.0,
    sample_interval_seconds: Interval = 5.0,
    startup_timeout_seconds: Startup = 900.0,
    stale_progress_seconds: Stale = 300.0,
    post_shutdown_grace_seconds: Grace = 10.0,
    termination_grace_seconds: TermGrace = 20.0,
    live: LiveOpt = Live.auto,
    shm_attribution: ShmOpt = ShmAttribution.host,
    min_trend_samples: TrendSamples = DEFAULT_MIN_TREND_SAMPLES,
    fail_on_throughput_drift: DriftGate = False,
    fail_on_gpu_throttle: GpuThrottleGate = False,
    shutdown_timeout_seconds: ShutdownTimeout = 120.0,
    no_stacks: NoStacks = False,
    py_spy: PySpy = None,
    sampler: SamplerOpt = SamplerKind.auto,
    run_contract: Annotated[
        bool,
        typer.Option(
            "--run-contract",
            help="judge <log-dir>/run_summary.json against the trainer's contract, as `soak run` does",
        ),
    ] = False,
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
    quiet_progress: QuietProgress = False,
    progress_every: ProgressEvery = 60.0,
    allow_restarts: AllowRestarts = 0,
    allow_signal_death: AllowSignalDeath = None,
    cell: Annotated[
        str | None,
        typer.Option(
            "--cell",
            help=f"the support-matrix cell this run is evidence for: {CELL_FORMAT}; recorded in the "
            "artifact (run_settings.cell) with the commit of the work tree it runs in",
        ),
    ] = None,
) -> None:
    """Watch any COMMAND that writes its progress under --log-dir (criteria needing a run_summary are
    not_applicable unless --run-contract)."""
    try:
        recorded = monitor_cell(cell) if cell is not None else {}
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    settings = MonitorSettings(
        command=tuple(command),
        mode="monitor",
        log_dir=log_dir,
        run_contract=run_contract,
        run_settings=recorded,
        **_monitor_fields(
            output,
            min_duration_seconds,
            sample_interval_seconds,
            startup_timeout_seconds,
            stale_progress_seconds,
            post_shutdown_grace_seconds,
            termination_grace_seconds,
            live,
            shm_attribution,
            min_trend_samples,
            fail_on_throughput_drift,
            _forensics(shutdown_timeout_seconds, no_stacks, py_spy),
            sampler,
            progress_every if quiet_progress else None,
            fail_on_gpu_throttle,
            allow_restarts,
            tuple(allow_signal_death or ()),
        ),
    )
    _execute(settings, ci_outputs(junit_xml, summary_md))


#: `soak demo` budget (measured sizing in docs/soak.md, "The demo budget"). The trainer stops at an
#: iteration count, not a time, so the duration depends on the host: with the learner pinned to the cores
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
    return TrainRoute("sac", "g1_walk_flat", "mujoco", 16, iterations, log_dir, DEMO_EXTRA_OVERRIDES)


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

    folder = reports_dir.resolve() / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise _fail(f"--reports-dir: {folder} already exists; retry in a second") from None
    settings = run_settings(
        demo_route(folder / "run", iterations),
        output=folder / "soak.json", min_duration_s=min_duration_seconds, sample_interval_s=1.0,
        startup_timeout_s=300.0, stale_progress_s=120.0, post_shutdown_grace_s=5.0, live=live.value,
    )  # fmt: skip
    try:
        validate_settings(settings)
    except SettingsError as exc:
        folder.rmdir()  # nothing half-written: the folder is still empty
        raise _fail(str(exc)) from None
    _execute(settings)


def report(artifact: Annotated[Path, typer.Argument(help="a soak artifact (.json)")]) -> None:
    """Render the HTML report beside ARTIFACT."""
    from harness.soak.evidence.report import report_command

    raise typer.Exit(report_command(artifact))


def compare(  # noqa: PLR0913 — typer declares one parameter per CLI option
    base: Annotated[Path, typer.Argument(help="the baseline soak artifact (.json)")],
    new: Annotated[Path, typer.Argument(help="the soak artifact to judge against it")],
    threshold: float = typer.Option(0.05, "--threshold", help="minimum effect size (0.05 = 5 %)"),
    allow_cross_host: bool = typer.Option(False, "--allow-cross-host", help="compare across hosts"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="exit 1 if any is worse"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON report on stdout (table: stderr)"),
    json_file: str | None = typer.Option(None, "--json-file", help="absolute path of a JSON report to write"),
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
) -> None:
    """Verdict per measure between two soaks of one workload: faster | slower | no_change | inconclusive."""
    from harness.soak.compare_cli import CompareOptions, compare_command

    options = CompareOptions(
        threshold, allow_cross_host, fail_on_regression, as_json, json_file, ci_outputs(junit_xml, summary_md)
    )
    raise typer.Exit(compare_command((base, new), options))


def cleanup() -> None:
    """Stop what dead soak monitors left running, and remove their /dev/shm segments: only processes and
    segments their ownership records prove (pid + start ticks, or the run's token; name + inode)."""
    from harness.soak.loop.leftovers import LeftoverError, clean, describe, find_leftovers

    try:
        leftovers = find_leftovers()
    except LeftoverError as exc:
        raise _fail(str(exc)) from None
    for left in leftovers:
        clean(left.path, left.record)
    print(f"stopped:\n{describe(leftovers)}" if leftovers else "nothing left by a dead soak monitor")


def build_app() -> typer.Typer:
    """The `soak` typer app."""
    from harness.soak.merge_cli import merge_command

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True)
    app.command("run")(run)
    app.command("monitor")(monitor)
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
