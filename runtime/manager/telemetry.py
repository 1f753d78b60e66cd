"""The learner side's running counters and the window state of its rate reports.

progress.jsonl carries env steps/s since the previous record; each TensorBoard window carries rates and
episode means since the previous window. :class:`Telemetry` remembers where the previous window ended,
so the report builders in reporting.py stay pure functions of what they are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LearnerCounters:
    """Written by the main thread; read by the heartbeat thread (single ints/floats, no torn values)."""

    iterations: int = 0
    slots: int = 0
    learner_updates: int = 0
    learner_wait_s: float = 0.0
    last_slot_mono: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)  # the latest learner.update() result

    def snapshot(self, num_envs: int) -> CounterSnapshot:
        return CounterSnapshot(
            iterations=self.iterations,
            total_env_steps=self.iterations * num_envs,
            learner_updates=self.learner_updates,
            learner_wait_s=self.learner_wait_s,
        )


@dataclass(frozen=True)
class CounterSnapshot:
    """The learner-side totals at one moment (``total_env_steps`` counts whole vector steps)."""

    iterations: int
    total_env_steps: int
    learner_updates: int
    learner_wait_s: float


@dataclass(frozen=True)
class EpisodeTotals:
    """Finished episodes with their summed returns and lengths (control steps)."""

    count: int
    return_sum: float
    length_sum: float


@dataclass(frozen=True)
class TbWindow:
    """What happened since the previous TensorBoard window (``episodes`` None: no control segment)."""

    seconds: float
    learner_updates: int
    env_steps: int
    learner_wait_s: float
    episodes: EpisodeTotals | None


class Telemetry:
    """Window marks of the progress rate and of the TensorBoard windows, owned by one session."""

    def __init__(self, started_mono: float, tb_min_interval_s: float) -> None:
        self._tb_min_interval_s = tb_min_interval_s
        self._rate_mark: tuple[float, int] | None = None
        self._tb_mark = (started_mono, CounterSnapshot(0, 0, 0, 0.0))
        self._tb_written_mono = float("-inf")
        self._episodes_seen = EpisodeTotals(0, 0.0, 0.0)

    def progress_rate(self, total_env_steps: int, now: float) -> float:
        """Env steps/s since the previous call; 0.0 on the first call."""
        mark, self._rate_mark = self._rate_mark, (now, total_env_steps)
        if mark is None or now <= mark[0]:
            return 0.0
        return (total_env_steps - mark[1]) / (now - mark[0])

    def tb_window(
        self, snap: CounterSnapshot, episodes: EpisodeTotals | None, now: float, *, force: bool = False
    ) -> TbWindow | None:
        """The window ending ``now``, or None while less than the minimum interval has passed (unless
        ``force``): at one iteration per few ms a window per iteration costs more than the physics."""
        if not force and now - self._tb_written_mono < self._tb_min_interval_s:
            return None
        self._tb_written_mono = now
        (last_t, last), self._tb_mark = self._tb_mark, (now, snap)
        return TbWindow(
            seconds=max(now - last_t, 1e-9),
            learner_updates=snap.learner_updates - last.learner_updates,
            env_steps=snap.total_env_steps - last.total_env_steps,
            learner_wait_s=snap.learner_wait_s - last.learner_wait_s,
            episodes=self._new_episodes(episodes),
        )

    def _new_episodes(self, totals: EpisodeTotals | None) -> EpisodeTotals | None:
        if totals is None:
            return None
        seen, self._episodes_seen = self._episodes_seen, totals
        return EpisodeTotals(
            totals.count - seen.count,
            totals.return_sum - seen.return_sum,
            totals.length_sum - seen.length_sum,
        )
