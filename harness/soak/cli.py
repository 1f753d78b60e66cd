"""`soak`: `soak run` (the owner-routed trainer), `soak monitor -- CMD` (any command), `soak report`.

Thin typer wrappers: settings are built and validated here (bad input -> exit 2 before anything is
spawned or written), the work is ``harness.soak.outcome.run_monitor``. Never imports torch.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from harness.ci.options import JunitXml, SummaryMd
from harness.ci.outputs import CiOutputError, CiOutputs
from harness.soak.host.forensics import ForensicsSettings
from harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from harness.soak.options import (
    AllowRestarts,
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
from harness.soak.verdicts.observation import DEFAULT_MIN_TREND_SAMPLES
from runtime.choices import Algo, Sim, Task

EXIT_BAD_INPUT = 2
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
    from runtime.config import ConfigError, compose

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
        "runtime.cli",
        "--algo",
        route.algo,
        "--task",
        route.task,
        "--sim",
        route.sim,
        *train_overrides(route),
    ]


def run_settings(route: TrainRoute, **monitor: Any) -> MonitorSettings:
    """Monitor settings of a `soak run` of the owner-routed trainer (``monitor``: the remaining
    MonitorSettings fields: output, timing, live, shm_attribution)."""
    return MonitorSettings(
        command=tuple(train_command(route)),
        mode="run",
        log_dir=route.log_dir,
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
        **monitor,
    )


def cuda_blocker(extra: list[str]) -> str | None:
    """Why an mjwarp soak cannot run here, or None. Checked through NVML (no torch in the monitor).

    ``training.mjwarp_device=cpu`` is the explicit diagnostic lane and needs no GPU.
    """
    if any(item.replace(" ", "") == "training.mjwarp_device=cpu" for item in extra):
        return None
    from foundation.nvml import gpu_snapshot

    snap = gpu_snapshot()
    if snap["available"]:
        return None
    return (
        f"--sim mjwarp needs a CUDA GPU and none is usable here ({snap['reason']}). "
        "For a CPU soak use `--sim mujoco`; `--extra-override training.mjwarp_device=cpu` is the explicit "
        "MJWarp CPU diagnostic lane (never production evidence)."
    )


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
) -> dict[str, Any]:
    """The MonitorSettings fields `soak run` and `soak monitor` take from the same options."""
    return {
        "allow_restarts": allow_restarts,
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
) -> None:
    """Watch any COMMAND that writes its progress under --log-dir (criteria needing a run_summary are
    not_applicable unless --run-contract)."""
    settings = MonitorSettings(
        command=tuple(command),
        mode="monitor",
        log_dir=log_dir,
        run_contract=run_contract,
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
