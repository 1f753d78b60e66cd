"""Which rank of a torchrun job a process belongs to, from the environment torchrun gave it.

torchrun exports ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_RUN_ID`` and
``TORCHELASTIC_RESTART_COUNT`` to each worker; the worker's own children (our collector) inherit them.
The agent has none of them. A process's environment is fixed at exec, so it is read once per process
identity and command line: a worker sampled between its fork and its exec still has the agent's
environment and argv, and is read again once it has its own. A process that is exiting has given its
memory back, argv and environment with it (its command line reads empty): it keeps the label it had.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

RANK_KEYS = {
    "RANK": "rank",
    "LOCAL_RANK": "local_rank",
    "WORLD_SIZE": "world_size",
    "TORCHELASTIC_RESTART_COUNT": "restart_count",
    "GROUP_RANK": "node_rank",  # torchrun's node (agent) rank
}


def rank_label(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """``{rank, local_rank, world_size, restart_count, run_id}`` of a torchrun worker's environment;
    None for a process outside a job of several ranks (or with a value that is not an integer)."""
    if "RANK" not in environ or environ.get("WORLD_SIZE", "1") == "1":
        return None
    label: dict[str, Any] = {}
    for key, name in RANK_KEYS.items():
        text = environ.get(key, "0")  # GROUP_RANK and the restart count are 0 when not set
        if not text.isdigit():
            return None
        label[name] = int(text)
    label["run_id"] = environ.get("TORCHELASTIC_RUN_ID")
    return label


@dataclass
class RankLabels:
    """Rank labels of the tree's processes, read once per identity (an unreadable one stays None)."""

    seen: dict[tuple[int, int, tuple[str, ...]], dict[str, Any] | None] = field(default_factory=dict)
    latest: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)  # last label read, by process

    def label(self, pid: int, start_ticks: int, cmdline: Sequence[str] = ()) -> dict[str, Any] | None:
        if not cmdline and (pid, start_ticks) in self.latest:
            return self.latest[(pid, start_ticks)]  # exiting: nothing left to read
        identity = (pid, start_ticks, tuple(cmdline))
        if identity not in self.seen:
            try:
                environ = psutil.Process(pid).environ()
            except (psutil.Error, OSError):
                environ = {}
            label = rank_label(environ)
            self.seen[identity] = label
            if label is not None:
                self.latest[(pid, start_ticks)] = label
        return self.seen[identity]
