"""How often the sampler reads a process's ``smaps_rollup``: PSS is the expensive part of a sample.

The kernel computes PSS by walking the process's page tables, so one read costs time in proportion to the
resident 4 KiB pages: about 0.12 ms for a small Python process, 4.6 ms for 256 MiB and 15 ms (p95 25 ms)
for 1 GiB on the development VM, against 0.02 ms for its ``stat`` (huge pages cost far less: 0.5 ms for
1 GiB of transparent huge pages). Reading a multi-GiB trainer every second would alone spend more than the
monitor's 2 % budget of one core.

So each identity keeps its own period: the last read's cost divided by the read budget of one sample,
rounded up, between 1 and the staleness cap, in samples. Both are set per second of sampling, not per
sample: a read may take ``budget_ms`` for each second between samples (so one process's reads take at
most 0.4 % of one core at any interval), and no value is older than ``max_age_s`` seconds (nor than
``max_period`` samples). At 1 s sampling a small process is read at every sample, a 1 GiB one every
4th, the real CPU trainer of ``soak demo`` (1.5 GB resident, 20-50 ms a read on a busy host) every 5th
to 13th; at 5 s sampling the same trainer is read every 5 to 15 s. Why that often: a survival verdict
bounds the rate of growth from the reads it has, and the rate bound of a ten-minute soak read every
30 s (twenty reads) let a leak that would exhaust the host in half the target pass as ``survives`` in
most runs (docs/soak-design.md, "How PSS stays cheap"). A sample also stops reading once its reads
took ``sample_budget_ms`` per second of sampling (a 100-process tree of small processes would spend
25 ms on them at 1 s): the processes it skips carry their values to a later sample. A process never
read before is always read, and none is staler than the cap, whatever the budgets. A process whose RSS (free: it comes with the ``stat``) moved by
``rss_move_bytes`` or ``rss_move_fraction`` since its last read is read again at once, budget
permitting: its PSS has most likely moved too, and a process whose memory grows is exactly the one to
measure. A steady trainer is read rarely; a leaking one often. Between reads the record repeats the last
values read and ``rollup_age_samples`` says how many samples ago that was (0: read for this sample), so
a reader can tell a carried value from a fresh one.

The same read also counts the process's mappings (``maps``, against ``vm.max_map_count``) and takes its
open-files limit (``limits``): both are carried and aged with PSS, and their cost, which grows with the
mapping count, is part of the cost that sets the period.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Rollup = dict[str, int | None]


@dataclass
class _Entry:
    values: Rollup
    age: int  # samples since the read
    period: int
    rss_bytes: int  # RSS when read


@dataclass
class RollupSchedule:
    """Per-identity read schedule (state across samples). ``read(pid)`` does the actual read."""

    read: Callable[[int], Rollup]
    budget_ms: float = 4.0  # per second of sampling
    sample_budget_ms: float = 10.0  # per second of sampling
    max_period: int = 30  # samples
    max_age_s: float = 30.0
    interval_s: float = 1.0  # between samples; ``pace`` sets the run's
    rss_move_bytes: int = 8 << 20
    rss_move_fraction: float = 0.02
    clock: Callable[[], float] = time.perf_counter  # seconds; a test passes a fake one
    entries: dict[tuple[int, int], _Entry] = field(default_factory=dict)
    spent_ms: float = 0.0  # read time spent in the current sample

    def values(self, pid: int, start_ticks: int, rss_bytes: int) -> tuple[Rollup, int]:
        """The rollup values for this sample of ``(pid, start_ticks)`` (whose RSS is ``rss_bytes`` now)
        and their age in samples."""
        key = (pid, start_ticks)
        entry = self.entries.get(key)
        if entry is not None and not self._due(entry, rss_bytes):
            entry.age += 1
            return dict(entry.values), entry.age
        started = self.clock()
        values = self.read(pid)
        cost_ms = (self.clock() - started) * 1000.0
        self.spent_ms += cost_ms
        period = max(1, min(self._cap(), math.ceil(cost_ms / (self.budget_ms * self.interval_s))))
        self.entries[key] = _Entry(values, 0, period, rss_bytes)
        return dict(values), 0

    def _due(self, entry: _Entry, rss_bytes: int) -> bool:
        if entry.age + 1 >= self._cap():
            return True
        if self.spent_ms >= self.sample_budget_ms * self.interval_s:
            return False
        moved = abs(rss_bytes - entry.rss_bytes)
        if moved >= max(self.rss_move_bytes, self.rss_move_fraction * entry.rss_bytes):
            return True
        return entry.age + 1 >= entry.period

    def pace(self, interval_s: float) -> None:
        """Samples come ``interval_s`` seconds apart: the budgets and the staleness cap, set per second,
        are converted to samples at that pace."""
        if not interval_s > 0:
            raise ValueError(f"interval_s: must be > 0 seconds, got {interval_s}")
        self.interval_s = interval_s

    def _cap(self) -> int:
        """The most samples a value is carried: ``max_age_s`` at this pace, at most ``max_period``."""
        return max(1, min(self.max_period, math.ceil(self.max_age_s / self.interval_s)))

    def start_sample(self, alive: set[tuple[int, int]]) -> None:
        """A new sample begins: reset its read budget and drop identities no longer alive."""
        self.spent_ms = 0.0
        for key in [k for k in self.entries if k not in alive]:
            del self.entries[key]
