"""The types both soak samplers share, and the host roots they read: what tree tracking, supervision
and the ownership record need of a process, and what a sampler can observe on this host."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

SamplerName = Literal["linux", "portable"]
PROC_ROOT = Path("/proc")
SHM_ROOT = Path("/dev/shm")


class ProcessStat(Protocol):
    """The fields of one process that tree tracking, supervision and the ownership record read."""

    @property
    def pid(self) -> int: ...
    @property
    def comm(self) -> str: ...
    @property
    def state(self) -> str: ...  # "Z" zombie, "X" dead; anything else is alive
    @property
    def ppid(self) -> int: ...
    @property
    def start_ticks(self) -> int: ...


@dataclass(frozen=True)
class Capabilities:
    """What a sampler can observe on this host.

    ``shm_root`` is the directory holding POSIX shared-memory segments as files, or None with
    ``shm_reason`` saying why they cannot be listed. ``unobservable_classes`` maps a resource class
    (harness.soak.verdicts.trends.RESOURCE_CLASSES) to why this sampler cannot measure it.
    """

    subreaper: bool
    orphan_tracking: str
    shm_root: Path | None
    shm_reason: str | None = None
    unobservable_classes: Mapping[str, str] = field(default_factory=dict)

    def describe(self, name: SamplerName) -> dict[str, Any]:
        """The artifact's ``sampler`` section."""
        return {
            "name": name,
            "platform": sys.platform,
            "subreaper": self.subreaper,
            "orphan_tracking": self.orphan_tracking,
            "shm_observable": self.shm_root is not None,
            "shm_reason": self.shm_reason,
            "unobservable_classes": dict(self.unobservable_classes),
        }
