"""The first death in a failed tree: which descendant went before the root did (pure).

When the root exits non-zero, its reason is often a descendant that died first: a vector-env worker
SIGKILLed, a rank of a torchrun job. The samples show when each process was last seen; a process that
vanished while the root was still alive, in the ``window_s`` before the root's last sample, is part of
the cascade that ended the run, and the earliest of them is named.

The kernel's exit events (``exits``, from the process-events connector, where the monitor could open it)
sharpen both halves: deaths that fall between the same two samples are ordered by the time the kernel
gave them, so the rank that failed is named before the peer it took down, and a process reaped by its
own parent still has its exit status. Without the connector the status is known only for processes the
monitor reaped itself (adopted orphans, ``reaped``), the deaths of one interval are named together, and
the sentence says so.

Rule, so that a helper that ran and exited normally long before is not blamed: the process was seen in
at least ``min_samples`` samples, and it vanished within ``window_s`` of the root's last sample.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WINDOW_S = 60.0
MIN_SAMPLES = 2
#: after the sample that first missed a process, how late its exit event may still be its own: a sample
#: reads the tree over some milliseconds after its ``t``
READ_SLACK_S = 1.0

Identity = tuple[int, int]  # (pid, start_ticks)
Exits = Mapping[int, tuple[int, float]]  # the kernel's pid -> (returncode, t), the newest exit per PID


@dataclass(frozen=True)
class Restarts:
    """The job's elastic restarts: those seen (None: not a job of ranks) and those ``--allow-restarts``
    permits."""

    seen: int | None
    allowed: int


@dataclass(frozen=True)
class LaterExit:
    """A process gone in the same sample interval as the first death, after it (the kernel's order)."""

    who: str
    exited_t: float


@dataclass(frozen=True)
class FirstDeath:
    """The first descendant gone before the root (named in the failure reason, not filed as a section).
    Times in seconds on the samples' clock.

    ``interval_ranks``: the ranks gone in that sample interval (the class rests on the interval, which
    the samples alone give, never on the order inside it); ``together``: those gone with it whose order
    is not known; ``then``: those gone after it, in the kernel's order; ``exited_t``: the kernel's exit
    event, or None; ``before_root_s``: how long before the root's last sample it went.
    """

    pid: int
    start_ticks: int
    name: str | None
    role: str | None
    rank: int | None
    interval_ranks: tuple[int, ...]
    last_seen_t: float
    gone_by_t: float
    exited_t: float | None
    before_root_s: float
    exit: str
    together: tuple[str, ...] = ()
    then: tuple[LaterExit, ...] = ()


def _sightings(samples: Sequence[Mapping[str, Any]]) -> dict[Identity, tuple[int, int, Mapping[str, Any]]]:
    """Per identity: the index of the last sample that held it, how many samples did, its last record."""
    seen: dict[Identity, tuple[int, int, Mapping[str, Any]]] = {}
    for index, sample in enumerate(samples):
        for proc in sample.get("processes") or []:
            key = (int(proc["pid"]), int(proc["start_ticks"]))
            seen[key] = (index, seen[key][1] + 1 if key in seen else 1, proc)
    return seen


def lifetimes(samples: Sequence[Mapping[str, Any]]) -> dict[Identity, tuple[float, float | None]]:
    """Per identity, the t of the last sample that held it and of the sample after (None when it was in
    the last one)."""
    times = [float(s["t"]) for s in samples]
    return {
        key: (times[last], times[last + 1] if last + 1 < len(times) else None)
        for key, (last, _, _) in _sightings(samples).items()
    }


def exit_event(pid: int, lifetime: tuple[float, float | None], exits: Exits) -> tuple[int, float] | None:
    """The kernel's exit event of the process with this PID and ``lifetime``: its PID's newest exit, if it
    came after the last sample that held the process and, when a later sample missed it, by then (with
    ``READ_SLACK_S``). Any other exit of that PID is another process's."""
    event = exits.get(pid)
    last_seen_t, gone_by_t = lifetime
    if event is None or event[1] < last_seen_t:
        return None
    if gone_by_t is not None and event[1] > gone_by_t + READ_SLACK_S:
        return None
    return event


def process_exits(samples: Sequence[Mapping[str, Any]], exits: Exits) -> dict[Identity, dict[str, Any]]:
    """``{returncode, exited_t}`` of every sampled process whose exit the kernel reported (``exit_event``)."""
    out = {}
    for (pid, start), lifetime in lifetimes(samples).items():
        event = exit_event(pid, lifetime, exits)
        if event is not None:
            out[(pid, start)] = {"returncode": event[0], "exited_t": event[1]}
    return out


def first_death(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    reaped: Mapping[Identity, int],
    window_s: float = WINDOW_S,
    min_samples: int = MIN_SAMPLES,
    exits: Exits | None = None,
) -> FirstDeath | None:
    """The first descendant gone before the root, or None. ``exits``: the kernel's."""
    found = _first_interval(samples, root_pid, window_s, min_samples)
    if found is None:
        return None
    group, interval, root_t = found
    ordered = sorted(
        ((proc, exit_event(int(proc["pid"]), interval, exits or {})) for proc in group), key=_death_order
    )
    return _record(ordered, interval, root_t, reaped)


def _first_interval(
    samples: Sequence[Mapping[str, Any]], root_pid: int | None, window_s: float, min_samples: int
) -> tuple[list[Mapping[str, Any]], tuple[float, float], float] | None:
    """The processes gone in the earliest interval before the root's last sample that lost any (the
    rule in the module docstring), that interval, and the root's last sample's t."""
    seen = _sightings(samples)
    root_last = max((last for (pid, _), (last, _, _) in seen.items() if pid == root_pid), default=None)
    if root_last is None:
        return None
    times = [float(s["t"]) for s in samples]
    root_t = times[root_last]
    gone = [
        (last, proc) for (pid, _), (last, count, proc) in seen.items()
        if pid != root_pid and last < root_last and count >= min_samples and root_t - times[last] <= window_s
    ]  # fmt: skip
    if not gone:
        return None
    earliest = min(last for last, _ in gone)
    group = [proc for last, proc in gone if last == earliest]
    return group, (times[earliest], times[earliest + 1]), root_t


def _record(
    ordered: Sequence[tuple[Mapping[str, Any], tuple[int, float] | None]],
    interval: tuple[float, float],
    root_t: float,
    reaped: Mapping[Identity, int],
) -> FirstDeath:
    (proc, event), rest = ordered[0], ordered[1:]
    status = reaped.get((int(proc["pid"]), int(proc["start_ticks"])))
    if status is None and event is not None:
        status = event[0]
    known = event is not None  # the first is ordered only when its own exit is known
    rank = proc.get("rank")
    return FirstDeath(
        together=tuple(_who(p) for p, e in rest if not known or e is None),
        then=tuple(LaterExit(who=_who(p), exited_t=e[1]) for p, e in rest if known and e is not None),
        pid=int(proc["pid"]),
        start_ticks=int(proc["start_ticks"]),
        name=proc.get("name"),
        role=proc.get("role"),
        rank=rank if isinstance(rank, int) else None,
        # the class rests on the interval, which the samples alone give, never on the order inside it
        interval_ranks=tuple(sorted({p["rank"] for p, _ in ordered if isinstance(p.get("rank"), int)})),
        last_seen_t=interval[0],
        gone_by_t=interval[1],
        exited_t=None if event is None else event[1],
        # an exit read up to READ_SLACK_S after the next sample can fall after the root's last sample
        before_root_s=max(0.0, round(root_t - (interval[1] if event is None else event[1]), 3)),
        exit=exit_text(status),
    )


def _death_order(item: tuple[Mapping[str, Any], tuple[int, float] | None]) -> tuple[bool, float, bool, int]:
    """Kernel exit time first; without one, ranks before other processes, then by PID."""
    proc, event = item
    return (event is None, 0.0 if event is None else event[1], proc.get("rank") is None, proc["pid"])


def death_to_name(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    reaped: Mapping[Identity, int],
    returncode: int | None,
    restarts: Restarts,
    exits: Exits | None = None,
) -> FirstDeath | None:
    """The first death worth naming: for a command that exited non-zero, within the window; for a job
    that restarted more often than allowed, the first of the whole run (the restart hid it); else None."""
    if returncode not in (0, None):
        return first_death(samples, root_pid, reaped, exits=exits)
    if restarts.seen is not None and restarts.seen > restarts.allowed:
        return first_death(samples, root_pid, reaped, window_s=float("inf"), exits=exits)
    return None


def exit_text(status: int | None) -> str:
    """``exit code N`` / ``killed by SIGKILL``, or why the status is not known."""
    if status is None:
        return "exit status not observable (reaped by its own parent)"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit code {status}"


def _who(proc: Mapping[str, Any]) -> str:
    rank = f"rank {proc['rank']} " if isinstance(proc.get("rank"), int) else ""
    return f"{rank}pid {proc['pid']} ({proc.get('role') or proc.get('name') or '?'})"


def death_sentence(death: FirstDeath) -> str:
    """The clause the failure reason adds, naming the first death (and any that went with it)."""
    also = f" (with {', '.join(death.together[:3])} in the same interval)" if death.together else ""
    if death.exited_t is None:
        when = f"went between t={death.last_seen_t:g} s and t={death.gone_by_t:g} s, at least"
    else:
        when = f"exited at t={death.exited_t:g} s (the kernel's exit event),"
    after = "".join(f"; then {later.who} at t={later.exited_t:g} s" for later in death.then[:3])
    who = _who({"pid": death.pid, "rank": death.rank, "role": death.role, "name": death.name})
    return (
        f"first death: {who}{also} {when} {death.before_root_s:g} s before the root's last sample; "
        f"{death.exit}{after}"
    )
