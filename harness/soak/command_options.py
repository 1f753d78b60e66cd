"""The options of `soak run` and `soak monitor`, each declared once in a frozen record.

A record's fields carry their flag, help and bounds (the annotations of ``harness.soak.options``);
``typer_command`` turns records into one typer command whose parameters are exactly their fields, and
hands the command's body the records built from what was parsed. The monitor's settings come from the
record by keyword (``MonitorOptions.settings``), so adding an option to both commands is one field here.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from soakbench.foundation.cells import CELL_FORMAT
from soakbench.harness.ci.options import JunitXml, SummaryMd
from soakbench.harness.soak.host.forensics import ForensicsSettings
from soakbench.harness.soak.loop.settings import Mode, MonitorSettings
from soakbench.harness.soak.options import (
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
    MustSurvive,
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
    UntilDecided,
    WarmupSeconds,
    WatchPath,
)
from soakbench.harness.soak.verdicts.observation import DEFAULT_MIN_TREND_SAMPLES
from soakbench.runtime.choices import Algo, Sim, Task


@dataclass(frozen=True)
class MonitorOptions:
    """What `soak run` and `soak monitor` both take: where to write, timing, live view, gates, CI files.

    Times in seconds; every bound is checked by ``validate_settings`` (exit 2 naming the option).
    """

    log_dir: LogDir
    output: Output
    min_duration_seconds: MinDuration = 0.0
    sample_interval_seconds: Interval = 5.0
    startup_timeout_seconds: Startup = 900.0
    stale_progress_seconds: Stale = 300.0
    post_shutdown_grace_seconds: Grace = 10.0
    termination_grace_seconds: TermGrace = 20.0
    live: LiveOpt = Live.auto
    shm_attribution: ShmOpt = ShmAttribution.host
    min_trend_samples: TrendSamples = DEFAULT_MIN_TREND_SAMPLES
    fail_on_throughput_drift: DriftGate = False
    fail_on_gpu_throttle: GpuThrottleGate = False
    shutdown_timeout_seconds: ShutdownTimeout = 120.0
    no_stacks: NoStacks = False
    py_spy: PySpy = None
    sampler: SamplerOpt = SamplerKind.auto
    junit_xml: JunitXml = None
    summary_md: SummaryMd = None
    quiet_progress: QuietProgress = False
    progress_every: ProgressEvery = 60.0
    allow_restarts: AllowRestarts = 0
    allow_signal_death: AllowSignalDeath = None
    must_survive: MustSurvive = None
    warmup_seconds: WarmupSeconds = None
    watch_path: WatchPath = None
    until_decided: UntilDecided = None

    def settings(
        self,
        *,
        command: tuple[str, ...],
        mode: Mode,
        run_settings: dict[str, Any],
        run_contract: bool = False,
        max_iterations: int | None = None,
    ) -> MonitorSettings:
        """The monitor's settings for ``command``, every shared field taken from these options."""
        return MonitorSettings(
            command=command,
            mode=mode,
            log_dir=self.log_dir,
            output=self.output,
            min_duration_s=self.min_duration_seconds,
            sample_interval_s=self.sample_interval_seconds,
            startup_timeout_s=self.startup_timeout_seconds,
            stale_progress_s=self.stale_progress_seconds,
            post_shutdown_grace_s=self.post_shutdown_grace_seconds,
            termination_grace_s=self.termination_grace_seconds,
            shm_attribution=self.shm_attribution.value,
            live=self.live.value,
            max_iterations=max_iterations,
            run_settings=run_settings,
            run_contract=run_contract,
            min_trend_samples=self.min_trend_samples,
            fail_on_throughput_drift=self.fail_on_throughput_drift,
            fail_on_gpu_throttle=self.fail_on_gpu_throttle,
            allow_restarts=self.allow_restarts,
            allow_signal_deaths=tuple(self.allow_signal_death or ()),
            forensics=ForensicsSettings(
                self.shutdown_timeout_seconds, stacks=not self.no_stacks, py_spy=self.py_spy
            ),
            sampler=self.sampler.value,
            progress_every_s=self.progress_every if self.quiet_progress else None,
            must_survive_s=self.must_survive,
            warmup_s=self.warmup_seconds,
            watch_paths=tuple(self.watch_path or ()),
            until_decided_s=self.until_decided,
        )


@dataclass(frozen=True)
class RunOptions:
    """What only `soak run` takes: the owner-routed trainer's route and budget."""

    num_envs: Annotated[int, typer.Option("--num-envs", min=1, help="environments per rank")] = 1024
    iterations: Annotated[int, typer.Option("--iterations", min=1, help="trainer iterations")] = 65000
    extra_override: Annotated[
        list[str] | None, typer.Option("--extra-override", help="dotted.key=value passed to train")
    ] = None
    algo: Annotated[Algo, typer.Option("--algo")] = Algo.flashsac
    task: Annotated[Task, typer.Option("--task")] = Task.g1_motion_tracking
    sim: Annotated[Sim, typer.Option("--sim")] = Sim.mjwarp
    nproc_per_node: Annotated[
        int,
        typer.Option(
            "--nproc-per-node", min=1, max=64, help="ranks: above 1, torchrun runs the trainer once per rank"
        ),
    ] = 1


@dataclass(frozen=True)
class WatchOptions:
    """What only `soak monitor` takes: the command, and how its run is recorded and judged."""

    command: Annotated[list[str], typer.Argument(help="the command to run and watch, after `--`")]
    run_contract: Annotated[
        bool,
        typer.Option(
            "--run-contract",
            help="judge <log-dir>/run_summary.json against the trainer's contract, as `soak run` does",
        ),
    ] = False
    cell: Annotated[
        str | None,
        typer.Option(
            "--cell",
            help=f"the support-matrix cell this run is evidence for: {CELL_FORMAT}; recorded in the "
            "artifact (run_settings.cell) with the commit of the work tree it runs in",
        ),
    ] = None


def _parameters(record: type, defaults: dict[str, Any]) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(record, include_extras=True)
    out = []
    for item in dataclasses.fields(record):
        default = defaults.get(item.name, item.default)
        default = inspect.Parameter.empty if default is dataclasses.MISSING else default
        kind = inspect.Parameter.KEYWORD_ONLY
        out.append(inspect.Parameter(item.name, kind, default=default, annotation=hints[item.name]))
    return out


def typer_command(
    body: Callable[..., None], records: tuple[type, ...], defaults: dict[str, Any] | None = None
) -> Callable[..., None]:
    """A typer command whose parameters are the fields of ``records`` (arguments first, in field
    order), calling ``body`` with one instance of each record. ``defaults``: per-command defaults that
    differ from the record's (field name -> value)."""
    names = {f.name for record in records for f in dataclasses.fields(record)}
    unknown = sorted(set(defaults or {}) - names)
    if unknown:  # a misspelt default would otherwise be ignored without a word
        raise TypeError(f"{body.__name__}: defaults for no option of its records: {unknown}")
    params = [p for record in records for p in _parameters(record, defaults or {})]
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required first; sort is stable
    owner = {f.name: record for record in records for f in dataclasses.fields(record)}
    if len(owner) != len(params):
        raise TypeError(f"{body.__name__}: two records declare the same option")

    def command(**parsed: Any) -> None:
        made = [record(**{k: v for k, v in parsed.items() if owner[k] is record}) for record in records]
        body(*made)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = body.__doc__
    command.__name__ = body.__name__
    return command
