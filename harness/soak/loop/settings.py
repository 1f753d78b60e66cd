"""Monitor settings: one frozen record per monitored run, checked field by field before anything is
spawned or written (``SettingsError`` names the field and what is allowed; the CLI exits 2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from soakbench.harness.soak.evidence.live import LiveMode
from soakbench.harness.soak.host.forensics import ForensicsSettings
from soakbench.harness.soak.host.sampling import SamplerChoice, sampler_problem
from soakbench.harness.soak.host.shm import Attribution
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.observation import DEFAULT_MIN_TREND_SAMPLES

Mode = Literal["run", "monitor"]


class SettingsError(ValueError):
    """Bad monitor settings; the message names the field and what is allowed (exit code 2)."""


@dataclass(frozen=True)
class MonitorSettings:
    """Everything one monitored run needs. Durations in seconds, paths absolute."""

    command: tuple[str, ...]
    mode: Mode
    log_dir: Path
    output: Path
    min_duration_s: float
    sample_interval_s: float
    startup_timeout_s: float
    stale_progress_s: float
    post_shutdown_grace_s: float
    termination_grace_s: float = 20.0
    shm_attribution: Attribution = "host"
    live: LiveMode = "auto"
    max_iterations: int | None = None
    run_settings: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    run_contract: bool = False  # monitor mode: judge <log-dir>/run_summary.json as `soak run` does
    min_trend_samples: int = DEFAULT_MIN_TREND_SAMPLES
    fail_on_throughput_drift: bool = (
        False  # a declining env steps/s fails the run (harness.soak.verdicts.drift)
    )
    fail_on_gpu_throttle: bool = False  # a GPU throttle episode fails the run (harness.soak.verdicts.gpu)
    allow_restarts: int = 0  # elastic restarts of a torchrun job that do not fail the run
    allow_signal_deaths: tuple[str, ...] = ()  # roles whose death by a signal does not fail the run
    forensics: ForensicsSettings = field(default_factory=ForensicsSettings)  # shutdown timeout, stacks
    sampler: SamplerChoice = "auto"  # harness.soak.host.sampling
    progress_every_s: float | None = None  # plain progress: a line per sample, or one per this many s
    must_survive_s: float | None = None  # the run length to survive (harness.soak.verdicts.survival)
    warmup_s: float | None = None  # a declared warm-up after start-up, left out of the projection
    watch_paths: tuple[Path, ...] = ()  # directories whose bytes on disk are sampled besides the log dir
    until_decided_s: float | None = None  # stop once survival decides, or after this long (seconds)

    @property
    def judges_summary(self) -> bool:
        return self.gates.judges_summary(self.mode)

    @property
    def gates(self) -> Gates:
        """The policy the run is judged under, apart from everything else the monitor needs."""
        return Gates(
            min_duration_s=self.min_duration_s,
            min_trend_samples=self.min_trend_samples,
            run_contract=self.run_contract,
            fail_on_throughput_drift=self.fail_on_throughput_drift,
            fail_on_gpu_throttle=self.fail_on_gpu_throttle,
            allow_restarts=self.allow_restarts,
            must_survive_s=self.must_survive_s,
            warmup_s=self.warmup_s,
            first_look_s=self._first_look_s(),
        )

    def _first_look_s(self) -> float | None:
        from soakbench.harness.soak.verdicts.looks import first_look_s

        return None if self.until_decided_s is None else first_look_s(self.sample_interval_s)

    @property
    def samples_path(self) -> Path:
        return self.output.with_name(self.output.stem + ".samples.jsonl")

    @property
    def console_path(self) -> Path:
        return self.output.with_name(self.output.stem + ".console.log")


def validate_settings(s: MonitorSettings) -> None:
    """Fail closed before anything is spawned or written; raises SettingsError."""
    for check in _SETTINGS_CHECKS:
        problem = check(s)
        if problem is not None:
            raise SettingsError(problem)


# Each check returns the first problem it finds or None; they run in this order, so the message is
# always about the earliest failing field.
def _command_problem(s: MonitorSettings) -> str | None:
    if not s.command:
        return "command: empty; give the command after `--`"
    if s.mode not in ("run", "monitor"):
        return f"mode: must be 'run' or 'monitor', got {s.mode!r}"
    return None


def _path_problem(s: MonitorSettings) -> str | None:
    for name, path in (("--log-dir", s.log_dir), ("--output", s.output)):
        if not path.is_absolute():
            return f"{name}: must be an absolute path, got {str(path)!r}"
    if s.output.is_relative_to(s.log_dir):
        return "--output: must not be inside --log-dir (it would count as run liveness)"
    return None


def _log_dir_problem(s: MonitorSettings) -> str | None:
    if not s.log_dir.exists():
        return None
    if not s.log_dir.is_dir():
        return f"--log-dir: {s.log_dir} exists and is not a directory"
    if any(s.log_dir.iterdir()):
        return (
            f"--log-dir: {s.log_dir} exists and is not empty; liveness is read from file changes "
            "there, so use a new or empty directory"
        )
    return None


def _output_problem(s: MonitorSettings) -> str | None:
    if s.output.suffix != ".json":
        return f"--output: must end in .json, got {s.output.name!r}"
    for label, path in (
        ("--output", s.output),
        ("samples file", s.samples_path),
        ("console log", s.console_path),
    ):
        if path.exists():
            return f"{label}: {path} already exists; choose a new artifact path"
    if not s.output.parent.is_dir():
        return f"--output: parent directory {s.output.parent} does not exist"
    return None


def _timing_problem(s: MonitorSettings) -> str | None:
    positive = {
        "--sample-interval-seconds": s.sample_interval_s,
        "--startup-timeout-seconds": s.startup_timeout_s,
        "--stale-progress-seconds": s.stale_progress_s,
    }
    for name, value in positive.items():
        if not value > 0:
            return f"{name}: must be > 0, got {value}"
    non_negative = {
        "--min-duration-seconds": s.min_duration_s,
        "--post-shutdown-grace-seconds": s.post_shutdown_grace_s,
        "--termination-grace-seconds": s.termination_grace_s,
    }
    for name, value in non_negative.items():
        if not value >= 0:
            return f"{name}: must be >= 0, got {value}"
    every = s.progress_every_s
    if every is not None and not 0 < every < float("inf"):
        return f"--progress-every: must be a number of seconds > 0, got {every}"
    samples = s.min_trend_samples
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        return f"--min-trend-samples: must be an integer >= 1, got {samples!r}"
    return None


def _survival_problem(s: MonitorSettings) -> str | None:
    target, warmup = s.must_survive_s, s.warmup_s
    if target is not None and not 0 < target < float("inf"):
        return f"--must-survive: must be a duration > 0 (90m, 72h, 3d), got {target} s"
    if warmup is not None and not 0 <= warmup < float("inf"):
        return f"--warmup-seconds: must be a number of seconds >= 0, got {warmup}"
    until = s.until_decided_s
    if until is not None and target is None:
        return "--until-decided: needs --must-survive (the target a look decides against)"
    if until is not None and not 0 < until < float("inf"):
        return f"--until-decided: must be a duration > 0 (the longest the run may go on), got {until} s"
    for path in s.watch_paths:
        if not path.is_absolute():
            return f"--watch-path: must be an absolute path, got {str(path)!r}"
        if path.exists() and not path.is_dir():
            return f"--watch-path: {path} exists and is not a directory"
    return None


def _attribution_problem(s: MonitorSettings) -> str | None:
    if s.shm_attribution not in ("host", "evidence"):
        return f"--shm-attribution: must be 'host' or 'evidence', got {s.shm_attribution!r}"
    return None


_SETTINGS_CHECKS: tuple[Callable[[MonitorSettings], str | None], ...] = (
    _command_problem,
    _path_problem,
    _log_dir_problem,
    _output_problem,
    _timing_problem,
    _survival_problem,
    _attribution_problem,
    lambda s: s.forensics.problem(),
    lambda s: sampler_problem(s.sampler),
)
