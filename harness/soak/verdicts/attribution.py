"""What grew, named: the families of fds, threads, child processes, folders and segments that account for
a class's growth over the analysed window (pure; samples in, short phrases out).

Each compares the window's earliest record with its latest: ``detail`` (harness.soak.host.detail) for a
process's fds and threads, the command lines of the tree's processes for new children, a watched path's
first-level folders (``disk[i].children``) and the run's ``/dev/shm`` segments. A phrase leads with the
growth, largest first: ``+142 /tmp/x/events.out.tfevents.*``, ``+3 python worker.py``,
``ckpt/ +2.1 GiB``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.verdicts.trends import level_text

#: phrases kept per class (the largest growth first)
MAX_PHRASES = 5
_DIGITS = re.compile(r"\d+")


def _grown(before: Mapping[str, float], after: Mapping[str, float]) -> list[tuple[str, float]]:
    """Keys whose value rose, with the rise, largest first."""
    rises = [(key, float(after[key]) - float(before.get(key, 0))) for key in after]
    return sorted(((k, d) for k, d in rises if d > 0), key=lambda item: -item[1])[:MAX_PHRASES]


def _details(window: Sequence[Mapping[str, Any]], pid: str | None) -> list[dict[str, Counter[str]]]:
    """The ``detail`` records of the window, in order: of one process, or summed over the tree."""
    out = []
    for sample in window:
        procs = [p for p in sample.get("processes") or () if isinstance(p.get("detail"), Mapping)]
        if pid is not None:
            procs = [p for p in procs if str(p.get("pid")) == pid]
        if procs:
            out.append(_summed([p["detail"] for p in procs]))
    return out


def _summed(details: Sequence[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    total: dict[str, Counter[str]] = {"fds": Counter(), "threads": Counter()}
    for detail in details:
        for kind in total:
            total[kind].update(detail.get(kind) or {})
    return total


def detail_growth(
    window: Sequence[Mapping[str, Any]], kind: str, *, pid: str | None = None
) -> tuple[str, ...]:
    """``+N family`` for the fds (``kind="fds"``) or threads (``"threads"``) that grew between the
    window's first and last detail records, of process ``pid`` or of the whole tree."""
    records = _details(window, pid)
    if len(records) < 2:
        return ()
    return tuple(f"+{int(d)} {name}" for name, d in _grown(records[0][kind], records[-1][kind]))


def _commands(sample: Mapping[str, Any]) -> Counter[str]:
    return Counter(
        _DIGITS.sub("*", " ".join(str(part) for part in (p.get("cmdline") or [p.get("name") or "?"])))[:120]
        for p in sample.get("processes") or ()
    )


def child_growth(window: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """``+N command`` for the command lines (digits as ``*``) whose processes grew in number."""
    if len(window) < 2:
        return ()
    return tuple(f"+{int(d)} {cmd}" for cmd, d in _grown(_commands(window[0]), _commands(window[-1])))


def disk_growth(window: Sequence[Mapping[str, Any]], path: str) -> tuple[str, ...]:
    """``folder/ +size`` for the first-level folders of a watched path that grew."""
    entries = [
        d.get("children") or {}
        for s in window
        for d in s.get("disk") or ()
        if isinstance(d, Mapping) and d.get("path") == path
    ]
    if len(entries) < 2:
        return ()
    return tuple(
        f"{name}{'' if name == '.' else '/'} +{level_text(d, 'bytes')}"
        for name, d in _grown(entries[0], entries[-1])
    )


def shm_growth(window: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """``name +size`` for the run's ``/dev/shm`` segments that grew (new ones included)."""
    first, last = ((s.get("shm") or {}).get("segments") or {} for s in (window[0], window[-1]))
    return tuple(f"{name} +{level_text(d, 'bytes')}" for name, d in _grown(first, last))
