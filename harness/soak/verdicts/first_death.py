"""The first death in a failed tree: which descendant went before the root did (pure).

When the root exits non-zero, its reason is often a descendant that died first: a vector-env worker
SIGKILLed, a rank of a torchrun job. The samples show when each process was last seen; a process that
vanished while the root was still alive, in the ``window_s`` before the root's last sample, is part of
the cascade that ended the run, and the earliest of them is named. Exit status: the monitor knows it only
for processes it reaped itself (adopted orphans, ``reaped``); a child reaped by its own parent just
vanishes, and the sentence says so.

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
) -> dict[str, Any] | None:
    """``{pid, start_ticks, name, role, rank, last_seen_t, gone_by_t, before_root_s, exit, together}`` of
    the first descendant gone before the root, or None. ``together`` lists the others that went in the
    same sample interval (their order is not observable at this sampling rate)."""
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
    group = sorted(
        (e for e in gone if e["last"] == earliest),
        key=lambda e: (e["proc"].get("rank") is None, e["proc"]["pid"]),
    )
    first, proc = group[0], group[0]["proc"]
    status = reaped.get((int(proc["pid"]), int(proc["start_ticks"])))
    return {
        "together": [_who(e["proc"]) for e in group[1:]],
        "pid": proc["pid"],
        "start_ticks": proc["start_ticks"],
        "name": proc.get("name"),
        "role": proc.get("role"),
        "rank": proc.get("rank"),
        "last_seen_t": times[first["last"]],
        "gone_by_t": times[first["last"] + 1],
        "before_root_s": round(root_t - times[first["last"] + 1], 3),
        "exit": exit_text(status),
    }


def death_to_name(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    reaped: Mapping[tuple[int, int], int],
    returncode: int | None,
    restarts: int | None,
    allowed_restarts: int,
) -> dict[str, Any] | None:
    """The first death worth naming: for a command that exited non-zero, within the window; for a job
    that restarted more often than allowed, the first of the whole run (the restart hid it); else None."""
    if returncode not in (0, None):
        return first_death(samples, root_pid, reaped)
    if restarts is not None and restarts > allowed_restarts:
        return first_death(samples, root_pid, reaped, window_s=float("inf"))
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
    return (
        f"first death: {_who(death)}{also} went between t={death['last_seen_t']:g} s and "
        f"t={death['gone_by_t']:g} s, at least {death['before_root_s']:g} s before the root's last sample; "
        f"{death['exit']}"
    )
