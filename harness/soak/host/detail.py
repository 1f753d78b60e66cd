"""What a process holds, grouped so that growth can be named: its fds by normalized target and its
threads by normalized name.

A leak verdict says that fds grow; a person fixing it needs to know *which* fds: 142 more
``/tmp/x/events.out.tfevents.*`` files, or 60 more ``socket`` ends. Targets and thread names carry
counters (``events.out.tfevents.1733500000.host.4242.0``, ``pt_autograd_3``); every run of digits
becomes ``*`` so that the members of one family group together. Read on a sparse schedule by the
sampler (``DETAIL_EVERY`` samples): the readlinks repeat the fd count's and the thread names cost one
read per thread, and attribution compares two moments of a window, not every sample.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

#: a detail record every this many samples (and at the first): attribution compares a window's
#: earliest and latest records, so a sparse series suffices
DETAIL_EVERY = 12
#: groups kept per process and kind (the largest): a process with 10,000 distinct files keeps its record small
MAX_GROUPS = 40
_DIGITS = re.compile(r"\d+")


def fd_group(target: str) -> str:
    """The family of an fd target: ``pipe``, ``socket``, ``anon_inode:[eventfd]``, or the path with every
    run of digits as ``*`` (``/tmp/x/events.out.tfevents.*.host.*.*``)."""
    for kind in ("pipe:", "socket:"):
        if target.startswith(kind):
            return kind[:-1]
    return _DIGITS.sub("*", target)


def _largest(counts: Counter[str]) -> dict[str, int]:
    return dict(counts.most_common(MAX_GROUPS))


def fd_groups(proc_root: Path, pid: int) -> dict[str, int] | None:
    """The process's open fds by family, or None when its fd folder cannot be read."""
    folder = f"{proc_root}/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    counts: Counter[str] = Counter()
    for name in names:
        try:
            counts[fd_group(os.readlink(f"{folder}/{name}"))] += 1
        except OSError:
            continue  # closed mid-scan
    return _largest(counts)


def thread_names(proc_root: Path, pid: int) -> dict[str, int] | None:
    """The process's threads by normalized name (``/proc/PID/task/*/comm``), or None when unreadable."""
    folder = f"{proc_root}/{pid}/task"
    try:
        tids = os.listdir(folder)
    except OSError:
        return None
    counts: Counter[str] = Counter()
    for tid in tids:
        try:
            with open(f"{folder}/{tid}/comm", encoding="utf-8", errors="replace") as fh:
                counts[_DIGITS.sub("*", fh.read().strip())] += 1
        except OSError:
            continue  # exited mid-scan
    return _largest(counts)


def process_detail(proc_root: Path, pid: int) -> dict[str, Any]:
    """The ``detail`` of one process record: ``{fds: {family: n}, threads: {name: n}}`` (each None when
    unreadable)."""
    return {"fds": fd_groups(proc_root, pid), "threads": thread_names(proc_root, pid)}
