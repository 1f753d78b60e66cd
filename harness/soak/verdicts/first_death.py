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
from typing import Any

WINDOW_S = 60.0
MIN_SAMPLES = 2


def first_death(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    reaped: Mapping[tuple[int, int], int],
    window_s: float = WINDOW_S,
    min_samples: int = MIN_SAMPLES,
    exits: Mapping[int, tuple[int, float]] | None = None,
) -> dict[str, Any] | None:
    """``{pid, start_ticks, name, role, rank, interval_ranks, last_seen_t, gone_by_t, exited_t,
    before_root_s, exit, together, then}`` of the first descendant gone before the root, or None. ``exits``: the kernel's
    ``pid -> (returncode, t)``. ``then`` lists the others gone in the same sample interval in the order of
    their exit events, with their times; ``together`` those whose order is not known."""
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    root_last = None
    times = [float(s["t"]) for s in samples]
    for index, sample in enumerate(samples):
        for proc in sample.get("processes") or []:
            if proc["pid"] == root_pid:
                root_last = index
                continue
            key = (int(proc["pid"]), int(proc["start_ticks"]))
            entry = seen.setdefault(key, {"proc": proc, "count": 0})
            entry.update(last=index, count=entry["count"] + 1, proc=proc)
    if root_last is None:
        return None
    root_t = times[root_last]
    gone = [
        e for e in seen.values()
        if e["last"] < root_last and e["count"] >= min_samples and root_t - times[e["last"]] <= window_s
    ]  # fmt: skip
    if not gone:
        return None
    earliest = min(e["last"] for e in gone)
    interval = (times[earliest], times[earliest + 1])
    group = [
        dict(e, exit_event=_exit_event(e["proc"], interval, exits or {}))
        for e in gone
        if e["last"] == earliest
    ]
    group.sort(key=_death_order)
    first, proc = group[0], group[0]["proc"]
    event = first["exit_event"]
    status = reaped.get((int(proc["pid"]), int(proc["start_ticks"])))
    if status is None and event is not None:
        status = event[0]
    ordered = event is not None
    return {
        "together": [_who(e["proc"]) for e in group[1:] if not ordered or e["exit_event"] is None],
        "then": [
            {"who": _who(e["proc"]), "exited_t": e["exit_event"][1]}
            for e in group[1:]
            if ordered and e["exit_event"] is not None
        ],
        "pid": proc["pid"],
        "start_ticks": proc["start_ticks"],
        "name": proc.get("name"),
        "role": proc.get("role"),
        "rank": proc.get("rank"),
        # the class rests on the interval, which the samples alone give, never on the order inside it
        "interval_ranks": sorted(
            {e["proc"]["rank"] for e in group if isinstance(e["proc"].get("rank"), int)}
        ),
        "last_seen_t": interval[0],
        "gone_by_t": interval[1],
        "exited_t": None if event is None else event[1],
        "before_root_s": round(root_t - (interval[1] if event is None else event[1]), 3),
        "exit": exit_text(status),
    }


def _exit_event(
    proc: Mapping[str, Any], interval: tuple[float, float], exits: Mapping[int, tuple[int, float]]
) -> tuple[int, float] | None:
    """The kernel's exit event of this process: its PID's, when it falls in the interval in which the
    samples lost the process (a second of slack for the sample's own read time); else None."""
    event = exits.get(int(proc["pid"]))
    if event is None or not interval[0] - 1.0 <= event[1] <= interval[1] + 1.0:
        return None
    return event


def _death_order(entry: Mapping[str, Any]) -> tuple[bool, float, bool, int]:
    """Kernel exit time first; without one, ranks before other processes, then by PID."""
    event, proc = entry["exit_event"], entry["proc"]
    return (event is None, 0.0 if event is None else event[1], proc.get("rank") is None, proc["pid"])


def death_to_name(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    reaped: Mapping[tuple[int, int], int],
    returncode: int | None,
    restarts: tuple[int | None, int],
    exits: Mapping[int, tuple[int, float]] | None = None,
) -> dict[str, Any] | None:
    """The first death worth naming: for a command that exited non-zero, within the window; for a job
    that restarted more often than allowed (``restarts``: seen, allowed), the first of the whole run (the
    restart hid it); else None."""
    seen, allowed = restarts
    if returncode not in (0, None):
        return first_death(samples, root_pid, reaped, exits=exits)
    if seen is not None and seen > allowed:
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


def death_sentence(death: Mapping[str, Any]) -> str:
    """The clause the failure reason adds, naming the first death (and any that went with it)."""
    together = death.get("together") or []
    also = f" (with {', '.join(together[:3])} in the same interval)" if together else ""
    if death.get("exited_t") is None:
        when = f"went between t={death['last_seen_t']:g} s and t={death['gone_by_t']:g} s, at least"
    else:
        when = f"exited at t={death['exited_t']:g} s (the kernel's exit event),"
    then = death.get("then") or []
    after = "".join(f"; then {d['who']} at t={d['exited_t']:g} s" for d in then[:3])
    return (
        f"first death: {_who(death)}{also} {when} {death['before_root_s']:g} s before the root's last "
        f"sample; {death['exit']}{after}"
    )
