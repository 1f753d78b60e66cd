"""The sampler interface: what the soak monitor needs from the host to watch a process tree.

Two implementations: ``LinuxSampler`` (the ``/proc`` reader of harness.soak.host.procs, a child subreaper,
every fd class) and ``harness.soak.host.portable.PortableSampler`` (psutil, no subreaper, no fd classes).
Both produce the per-process record of harness.soak.host.sampler and the same ``(pid, start_ticks)``
identity (start time after boot in clock ticks), so the tree tracker, the supervisor and the ownership
record work unchanged over either.

What a sampler cannot observe it declares in ``Capabilities``; the evaluation turns those into
``not_observable`` resource classes and ``not_applicable`` rows with the reason, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from soakbench.harness.soak.host.interface import PROC_ROOT, SHM_ROOT, Capabilities, ProcessStat, SamplerName
from soakbench.harness.soak.host.procs import (
    ProcReader,
    StatFields,
    TreeTracker,
    set_child_subreaper,
    totals_of,
)
from soakbench.harness.soak.host.shm import ShmSnapshot, held_by_processes, snapshot_shm
from soakbench.harness.soak.host.token import proc_environ_token

SamplerChoice = Literal["auto", "linux", "portable"]
SAMPLER_CHOICES: tuple[str, ...] = ("auto", "linux", "portable")


class ProcessSampler(Protocol):
    """The host edge of the monitor: process listing, per-process records, shm evidence, subreaper."""

    name: SamplerName
    capabilities: Capabilities

    def stat(self, pid: int) -> ProcessStat | None: ...
    def all_stats(self) -> Mapping[int, ProcessStat]: ...
    def cmdline(self, pid: int) -> list[str]: ...
    def is_alive(self, pid: int, start_ticks: int) -> bool: ...
    def sample_process(
        self, st: ProcessStat, gpu_by_pid: Mapping[int, int | None] | None, *, maps: bool = True
    ) -> tuple[dict[str, Any], set[str]]: ...
    def totals(
        self, processes: Iterable[Mapping[str, Any]], gpu_available: bool, *, zombies: int = 0
    ) -> dict[str, Any]: ...
    def tracker(self, monitor_pid: int, root: ProcessStat, exclude: set[int], token: str) -> TreeTracker: ...
    def set_subreaper(self, enabled: bool) -> bool: ...
    def snapshot_shm(self) -> ShmSnapshot: ...
    def held_by_processes(self, names: Iterable[str], exclude_pids: Iterable[int]) -> dict[str, int]: ...
    def token_of(self, pid: int) -> str | None: ...
    def pace(self, sample_interval_s: float) -> None: ...


LINUX_CAPABILITIES = Capabilities(
    subreaper=True,
    orphan_tracking="child subreaper: re-parented descendants are adopted; known (pid, start ticks) kept",
    shm_root=SHM_ROOT,
)


class LinuxSampler(ProcReader):
    """The ``/proc`` sampler: harness.soak.host.procs as it is, plus the interface's few extra methods."""

    name: SamplerName = "linux"
    capabilities = LINUX_CAPABILITIES

    def pace(self, sample_interval_s: float) -> None:
        """Samples come ``sample_interval_s`` apart: the PSS read schedule's budgets are per second."""
        self.rollups.pace(sample_interval_s)

    def sample_process(
        self, st: ProcessStat, gpu_by_pid: Mapping[int, int | None] | None, *, maps: bool = True
    ) -> tuple[dict[str, Any], set[str]]:
        """ProcReader.sample_process of a stat this sampler listed."""
        if not isinstance(st, StatFields):
            raise TypeError(f"the linux sampler samples its own /proc stats, got {type(st).__name__}")
        return super().sample_process(st, gpu_by_pid, maps=maps)

    def totals(
        self, processes: Iterable[Mapping[str, Any]], gpu_available: bool, *, zombies: int = 0
    ) -> dict[str, Any]:
        return totals_of(processes, gpu_available, zombies=zombies)

    def tracker(self, monitor_pid: int, root: ProcessStat, exclude: set[int], token: str) -> TreeTracker:
        return TreeTracker(monitor_pid, root.pid, root.start_ticks, exclude=exclude)

    def set_subreaper(self, enabled: bool) -> bool:
        return set_child_subreaper(enabled)

    def snapshot_shm(self) -> ShmSnapshot:
        return snapshot_shm(SHM_ROOT)

    def held_by_processes(self, names: Iterable[str], exclude_pids: Iterable[int]) -> dict[str, int]:
        return held_by_processes(names, exclude_pids, self.root)

    def token_of(self, pid: int) -> str | None:
        return proc_environ_token(pid)


def resolve_choice(choice: str, proc_root: Path = PROC_ROOT) -> SamplerName:
    """The sampler ``--sampler`` names: ``auto`` is ``linux`` where ``/proc`` exists, else ``portable``."""
    if choice == "auto":
        return "linux" if (proc_root / "self" / "stat").exists() else "portable"
    if choice in ("linux", "portable"):
        return "linux" if choice == "linux" else "portable"
    raise ValueError(sampler_problem(choice))


def sampler_problem(choice: str, proc_root: Path = PROC_ROOT) -> str | None:
    """Why ``--sampler choice`` cannot run here, or None."""
    if choice not in SAMPLER_CHOICES:
        return f"--sampler: must be one of {', '.join(SAMPLER_CHOICES)}, got {choice!r}"
    if choice == "linux" and not (proc_root / "self" / "stat").exists():
        return f"--sampler linux: needs Linux {proc_root}, which this host lacks; use --sampler portable"
    return None


def make_sampler(choice: str) -> ProcessSampler:
    """The sampler for a validated ``--sampler`` value (psutil is imported only for the portable one)."""
    if resolve_choice(choice) == "linux":
        return LinuxSampler()
    from soakbench.harness.soak.host.portable import PortableSampler

    return PortableSampler()
