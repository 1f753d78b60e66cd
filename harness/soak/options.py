"""The options `soak run` and `soak monitor` share, declared once as typed annotations."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from soakbench.foundation.durations import parse_duration


def _duration_option(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


class Live(StrEnum):
    auto = "auto"
    rich = "rich"
    plain = "plain"
    off = "off"


class ShmAttribution(StrEnum):
    host = "host"
    evidence = "evidence"


class SamplerKind(StrEnum):
    auto = "auto"
    linux = "linux"
    portable = "portable"


MinDuration = Annotated[float, typer.Option("--min-duration-seconds", help="the run must last at least this")]
Interval = Annotated[float, typer.Option("--sample-interval-seconds", help="seconds between samples")]
Startup = Annotated[
    float, typer.Option("--startup-timeout-seconds", help="no progress within this -> timeout/startup")
]
Stale = Annotated[
    float, typer.Option("--stale-progress-seconds", help="no run-dir change for this -> timeout/stale_tick")
]
Grace = Annotated[
    float, typer.Option("--post-shutdown-grace-seconds", help="wait after exit before residual checks")
]
TermGrace = Annotated[
    float,
    typer.Option("--termination-grace-seconds", help="SIGTERM -> SIGKILL delay when the monitor stops a run"),
]
TrendSamples = Annotated[
    int,
    typer.Option(
        "--min-trend-samples",
        help="post-start-up samples every observable resource class's verdict must rest on",
    ),
]
LogDir = Annotated[Path, typer.Option("--log-dir", help="absolute, new or empty run directory")]
Output = Annotated[Path, typer.Option("--output", help="absolute path of the soak artifact (.json)")]
LiveOpt = Annotated[
    Live,
    typer.Option(
        "--live",
        help="auto: rich on a TTY, plain lines otherwise; off: no live view (the verdict is still printed)",
    ),
]
ShmOpt = Annotated[
    ShmAttribution,
    typer.Option(
        "--shm-attribution",
        help="host: also count new same-uid /dev/shm entries (see docs/soak-reference.md, After exit)",
    ),
]

ShutdownTimeout = Annotated[
    float,
    typer.Option(
        "--shutdown-timeout-seconds",
        help="after the final progress record the tree must be gone within the post-shutdown grace plus "
        "this, else shutdown_hang",
    ),
]
NoStacks = Annotated[
    bool, typer.Option("--no-stacks", help="take no stacks before a kill (the artifact records it)")
]
PySpy = Annotated[
    Path | None,
    typer.Option("--py-spy", help="py-spy executable (default: beside the interpreter, else on PATH)"),
]

SamplerOpt = Annotated[
    SamplerKind,
    typer.Option(
        "--sampler",
        help="auto: linux where /proc exists, else portable (psutil; docs/soak-reference.md, Samplers)",
    ),
]
DriftGate = Annotated[
    bool,
    typer.Option(
        "--fail-on-throughput-drift",
        help="a declining env steps/s over the trend window fails the run (reported either way)",
    ),
]

GpuThrottleGate = Annotated[
    bool,
    typer.Option(
        "--fail-on-gpu-throttle",
        help="a sample with a thermal, power-brake or hardware-slowdown GPU clock event fails the run "
        "(reported either way)",
    ),
]


AllowSignalDeath = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-signal-death",
        help="a process role (as /proc/<pid>/comm names it, e.g. collector) whose death by a signal does not "
        "fail the run; repeat for several (row tree_deaths)",
    ),
]
AllowRestarts = Annotated[
    int,
    typer.Option(
        "--allow-restarts",
        min=0,
        max=100,
        help="elastic restarts of a torchrun job that do not fail the run (soak run passes it to torchrun "
        "as --max-restarts)",
    ),
]


QuietProgress = Annotated[
    bool,
    typer.Option(
        "--quiet-progress", help="off a TTY, print a progress line only every --progress-every seconds"
    ),
]
ProgressEvery = Annotated[
    float, typer.Option("--progress-every", help="seconds between progress lines with --quiet-progress")
]


MustSurvive = Annotated[
    float | None,
    typer.Option(
        "--must-survive",
        parser=_duration_option,
        metavar="DURATION",
        help="the run length this host must carry the run through (90m, 72h, 3d): each resource with a "
        "limit is projected to it and survives, fails (exit 1) or is inconclusive (exit 3)",
    ),
]
CompareMustSurvive = Annotated[
    float | None,
    typer.Option(
        "--must-survive",
        parser=_duration_option,
        metavar="DURATION",
        help="judge both soaks' survival against this run length (90m, 72h, 3d; default: the new soak's "
        "--must-survive, else the base's); a class that fails it only in the new soak is a regression",
    ),
]
WarmupSeconds = Annotated[
    float | None,
    typer.Option(
        "--warmup-seconds",
        min=0.0,
        help="seconds after start-up that the survival projection leaves out (default: a change point "
        "in each series' growth rate finds the warm-up)",
    ),
]
UntilDecided = Annotated[
    float | None,
    typer.Option(
        "--until-decided",
        parser=_duration_option,
        metavar="MAX_DURATION",
        help="stop the run as soon as every resource with a limit survives --must-survive or one fails "
        "(looks spend 5 % error in all; a fail is stopped with stacks), or after MAX_DURATION undecided "
        "(exit 3)",
    ),
]
WatchPath = Annotated[
    list[Path] | None,
    typer.Option(
        "--watch-path",
        help="a directory whose bytes on disk are sampled and projected to its filesystem's free space; "
        "repeat for several (the log dir is always watched)",
    ),
]
