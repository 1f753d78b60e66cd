"""The monitor's limits on a live tree, as pure logic: start-up timeout, stale progress, shutdown hang, and
which processes stopped using CPU while the tree went stale.

Rules (docs/soak-reference.md, "Forensics: stacks before the kill"):

- before the first progress sign, the run fails ``timeout/startup`` after ``startup_timeout_s``;
- after it, no run-dir change for ``stale_progress_s`` fails ``timeout/stale_tick``;
- once a progress record says the command is finishing (``final: true`` or ``phase: "finalize"``), the
  stale rule gives way: the tree must be gone within ``post_shutdown_grace_s + shutdown_timeout_s`` of
  the first sample that saw that record, else ``shutdown_hang``. A command that said it is finishing and
  then hangs is never a ``timeout/stale_tick``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from soakbench.foundation.vocab import MonitorFailure

#: CPU time below this (seconds) counts as "not advanced": /proc reports whole clock ticks (10 ms).
CPU_EPSILON_S = 0.005


def is_final_record(progress: Mapping[str, Any] | None) -> bool:
    """True when a progress record says the command is finishing."""
    if not isinstance(progress, Mapping):
        return False
    return progress.get("final") is True or progress.get("phase") == "finalize"


class ShutdownLimit(Protocol):
    """The forensics setting the shutdown limit reads (harness.soak.host.forensics.ForensicsSettings)."""

    @property
    def shutdown_timeout_s(self) -> float: ...


class LimitSettings(Protocol):
    """The monitor settings the limits read (harness.soak.loop.settings.MonitorSettings has them)."""

    @property
    def startup_timeout_s(self) -> float: ...
    @property
    def stale_progress_s(self) -> float: ...
    @property
    def post_shutdown_grace_s(self) -> float: ...
    @property
    def forensics(self) -> ShutdownLimit: ...


@dataclass
class Limits:
    """The limits of one watched run (seconds). ``final_seen`` is the monotonic time of the first sample
    that carried a final progress record, None before."""

    startup_timeout_s: float
    stale_progress_s: float
    post_shutdown_grace_s: float
    shutdown_timeout_s: float
    final_seen: float | None = None

    @classmethod
    def of(cls, settings: LimitSettings) -> Limits:
        return cls(
            settings.startup_timeout_s,
            settings.stale_progress_s,
            settings.post_shutdown_grace_s,
            settings.forensics.shutdown_timeout_s,
        )

    def detail(self, failure: MonitorFailure | None, samples: Sequence[Mapping[str, Any]]) -> str | None:
        """``failure_detail`` of ``failure`` under these limits; None for no failure."""
        return None if failure is None else failure_detail(failure, samples, self)

    def check(
        self, progress: Mapping[str, Any] | None, now: float, t0: float, started: bool, last_change: float
    ) -> MonitorFailure | None:
        """The limit the tree breaks at monotonic ``now`` (spawned at ``t0``; ``last_change``: monotonic
        time of the last run-dir change), or None."""
        if self.final_seen is None and is_final_record(progress):
            self.final_seen = now
        if self.final_seen is not None:
            if now - self.final_seen > self.post_shutdown_grace_s + self.shutdown_timeout_s:
                return "shutdown_hang"
            return None
        if not started:
            return "timeout/startup" if now - t0 > self.startup_timeout_s else None
        return "timeout/stale_tick" if now - last_change > self.stale_progress_s else None


def _identity(process: Mapping[str, Any]) -> tuple[int, int]:
    return int(process["pid"]), int(process["start_ticks"])


def idle_processes(samples: Sequence[Mapping[str, Any]], window_s: float) -> list[dict[str, Any]]:
    """Processes of the last sample whose CPU time has not advanced over the last ``window_s`` seconds.

    Compares each process of the last sample with the same identity (pid + start ticks) in the latest
    sample at least ``window_s`` older; a process younger than the window is not judged. Each entry:
    ``{pid, start_ticks, name, cpu_s, idle_for_s}``.
    """
    if not samples:
        return []
    last = samples[-1]
    cutoff = float(last["t"]) - window_s
    earlier = [s for s in samples if float(s["t"]) <= cutoff]
    if not earlier:
        return []
    before = {_identity(p): p for p in earlier[-1].get("processes") or []}
    found = []
    for proc in last.get("processes") or []:
        old = before.get(_identity(proc))
        if old is None:
            continue
        if float(proc["cpu_s"]) - float(old["cpu_s"]) < CPU_EPSILON_S:
            found.append(
                {
                    "pid": proc["pid"],
                    "start_ticks": proc["start_ticks"],
                    "name": proc.get("name"),
                    "cpu_s": proc["cpu_s"],
                    "idle_for_s": round(float(last["t"]) - float(earlier[-1]["t"]), 3),
                }
            )
    return found


def idle_sentence(idle: Sequence[Mapping[str, Any]], limit: int = 5) -> str | None:
    """The failure-reason clause naming the processes whose CPU time stood still, or None."""
    if not idle:
        return None
    listed = ", ".join(
        f"pid {p['pid']} ({p.get('name') or '?'}) at {float(p['cpu_s']):.2f} CPU-s" for p in idle[:limit]
    )
    more = f" and {len(idle) - limit} more" if len(idle) > limit else ""
    window = min(float(p["idle_for_s"]) for p in idle)
    return f"no CPU time used for {window:.1f} s by {listed}{more}"


def failure_detail(
    failure: MonitorFailure, samples: Sequence[Mapping[str, Any]], limits: Limits
) -> str | None:
    """The clause the failure reason adds for ``failure``: the processes whose CPU time stood still over
    the stale window (``timeout/stale_tick``), or the processes still alive after the final record
    (``shutdown_hang``); None for the other limits or without samples."""
    if failure == "timeout/stale_tick":
        return idle_sentence(idle_processes(samples, limits.stale_progress_s))
    if failure == "shutdown_hang" and samples:
        alive = samples[-1].get("processes") or []
        # a job's ranks first, in rank order, then the rest as sampled
        ranked = sorted(alive, key=lambda p: (not isinstance(p.get("rank"), int), p.get("rank", 0)))
        listed = ", ".join(f"pid {p['pid']} ({_who(p)})" for p in ranked[:5])
        waited = limits.post_shutdown_grace_s + limits.shutdown_timeout_s
        return (
            f"{len(alive)} process(es) still alive {waited:g} s after the final progress record "
            f"(post-shutdown grace + shutdown timeout): {listed}"
        )
    return None


def _who(process: Mapping[str, Any]) -> str:
    name = process.get("name") or "?"
    return f"{name}, rank {process['rank']}" if isinstance(process.get("rank"), int) else str(name)
