"""What the monitor's loop does with each sample of the live tree, and what it accumulates meanwhile."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soakbench.foundation.vocab import MonitorFailure
from soakbench.harness.soak.evidence.live import LiveView, summarize
from soakbench.harness.soak.host.sampler import JobProgress, LivenessState, Sampler
from soakbench.harness.soak.loop.decide import UntilDecided
from soakbench.harness.soak.loop.settings import Mode, MonitorSettings
from soakbench.harness.soak.verdicts.hang import Limits
from soakbench.harness.soak.verdicts.looks import MonitorStop


@dataclass
class LoopState:
    """What the sampling loop accumulates while the command runs (private to the observe phase)."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    sample_ms: list[float] = field(default_factory=list)
    startup_end_t: float | None = None
    monitor_failure: MonitorFailure | None = None
    monitor_detail: str | None = None
    stop: MonitorStop | None = None


def _progress_started(mode: Mode, liveness: LivenessState, progress: JobProgress) -> bool:
    """Start-up is over at the first progress record (run mode) or the first file change (monitor)."""
    if mode == "run":
        return progress.last is not None
    return liveness.ever_changed


class SampleStep:
    """What the loop does with each sample of the live tree: record it, mark the end of start-up,
    update the view with a recent-rate ETA, and check the limits (harness.soak.verdicts.hang)."""

    def __init__(
        self,
        settings: MonitorSettings,
        state: LoopState,
        sampler: Sampler,
        view: LiveView,
        *,
        until: UntilDecided | None = None,
    ) -> None:
        self.settings = settings
        self.until = until
        self.state = state
        self.sampler = sampler
        self.view = view
        self.recent: deque[tuple[float, int]] = deque(maxlen=12)  # (t, iteration) of the last samples
        self.limits = Limits.of(settings)

    def record(self, sample: dict[str, Any], now: float) -> MonitorFailure | None:
        """Record ``sample`` (taken at monotonic ``now``); the limit it breaks, or None."""
        settings, state, sampler = self.settings, self.state, self.sampler
        state.samples.append(sample)
        state.sample_ms.append(sample["sample_ms"])
        _append_jsonl(settings.samples_path, sample)
        started = _progress_started(settings.mode, sampler.liveness, sampler.progress)
        if started and state.startup_end_t is None:
            state.startup_end_t = sample["t"]
        self.view.update(
            summarize(
                sample,
                phase="running" if started else "startup",
                max_iterations=settings.max_iterations,
                min_duration_s=settings.min_duration_s,
                iterations_per_s=self._iteration_rate(sample),
            )
        )
        last_change = sampler.liveness.last_change_mono(sampler.t0)
        failure = self.limits.check(sample["progress"], now, sampler.t0, started, last_change)
        state.monitor_detail = self.limits.detail(failure, state.samples)
        return failure

    def stop(self) -> MonitorStop | None:
        """After ``record``: the stop ``--until-decided`` calls for now, or None."""
        if self.until is None:
            return None
        return self.until.check(self.state.samples, self.state.startup_end_t)

    def _iteration_rate(self, sample: Mapping[str, Any]) -> float | None:
        """Iterations per second over the last samples that reported one, or None."""
        iteration = (sample["progress"] or {}).get("iteration")
        if isinstance(iteration, int):
            self.recent.append((sample["t"], iteration))
        recent = self.recent
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            return (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
        return None


def _append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line and flush it to the OS, so a monitor crash loses no sample already taken."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        fh.flush()
