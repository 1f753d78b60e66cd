"""The portable sampler: the soak monitor's host edge on psutil, for hosts without Linux ``/proc``.

What it observes: the process tree (parent links) and its zombies, each process's RSS, USS/PSS/swap where
psutil gives them (Linux: all three; macOS: USS only), threads, CPU time, fd count, the open-files limit
(where psutil has ``rlimit``: Linux, FreeBSD), command line. What it does not: fd classes (psutil counts
fds, it does not say which are eventfds or shared-memory objects), the count of memory mappings
(``map_count``: psutil lists mappings by parsing the whole ``smaps``, about 30 ms for a trainer, too much
for every sample) and, where there is no ``/dev/shm`` directory (macOS), POSIX shared-memory segments.

There is no child subreaper. Orphans are tracked by identity: a process once seen in the tree stays
tracked by ``(pid, start_ticks)`` wherever it is re-parented, and a process started after the root that
carries the run's token in its environment (``SOAKBENCH_SOAK_RUN``) is adopted even if it double-forked
away between two samples. A descendant that both escapes between samples and clears its environment is
not seen.

``start_ticks`` is psutil's create time expressed as clock ticks after boot, the unit of
``/proc/<pid>/stat`` field 22 (on Linux the two agree exactly), so identities are interchangeable with
the Linux sampler's and the ownership record's.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from soakbench.harness.soak.host.interface import SHM_ROOT, Capabilities, ProcessStat, SamplerName
from soakbench.harness.soak.host.procs import FD_CLASSES, Identity, TreeTracker, shm_name
from soakbench.harness.soak.host.shm import ShmSnapshot, snapshot_shm
from soakbench.harness.soak.host.token import RUN_TOKEN_ENV

_UNREADABLE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
_STAT_ATTRS = ["pid", "ppid", "name", "status", "create_time", "memory_info", "num_threads", "cpu_times"]
MEMORY_FIELDS = ("pss_bytes", "uss_bytes", "swap_bytes")
FD_REASON = (
    "the portable sampler counts a process's fds (psutil) but cannot classify them; "
    "{what} are identified only from Linux /proc/<pid>/fd links"
)
UNOBSERVABLE_CLASSES = {
    "eventfd": FD_REASON.format(what="eventfds"),
    "shared_memory_fd": FD_REASON.format(what="shared-memory fds"),
}
PSS_REASON = (
    "psutil gives PSS on Linux only, not on {platform}: the tree's memory verdict (on summed PSS) has no "
    "series; USS and RSS are reported"
)


def unobservable_classes(platform: str) -> dict[str, str]:
    """The resource classes this sampler cannot measure on ``platform`` (``sys.platform``), with why."""
    classes = dict(UNOBSERVABLE_CLASSES)
    if not platform.startswith("linux"):
        classes["pss"] = PSS_REASON.format(platform=platform)
    return classes


NO_SHM_REASON = (
    "no {root} directory on this platform (macOS keeps POSIX shared memory outside the file system), "
    "so segments the run left behind cannot be listed"
)


def start_ticks_of(create_time: float, boot_time: float, clock_ticks: int) -> int:
    """psutil's create time (unix s) as clock ticks after boot, the unit of the Linux identity."""
    return round((create_time - boot_time) * clock_ticks)


def state_of(status: str) -> str:
    """The one-letter state the tracker reads: ``Z`` zombie, ``X`` dead, else psutil's status name."""
    return {psutil.STATUS_ZOMBIE: "Z", psutil.STATUS_DEAD: "X"}.get(status, status)


@dataclass(frozen=True)
class PortableStat:
    """One process as psutil lists it; ``rss_bytes``/``threads``/``cpu_s`` are None where psutil was
    refused (another user's process)."""

    pid: int
    comm: str
    state: str
    ppid: int
    start_ticks: int
    rss_bytes: int | None
    threads: int | None
    cpu_s: float | None


def stat_from_info(info: Mapping[str, Any], boot_time: float, clock_ticks: int) -> PortableStat | None:
    """A ``PortableStat`` from a ``psutil.process_iter`` info dict, or None when its identity is unknown."""
    if info.get("create_time") is None or info.get("ppid") is None:
        return None
    mem, cpu = info.get("memory_info"), info.get("cpu_times")
    return PortableStat(
        pid=int(info["pid"]),
        comm=str(info.get("name") or ""),
        state=state_of(str(info.get("status") or "")),
        ppid=int(info["ppid"]),
        start_ticks=start_ticks_of(float(info["create_time"]), boot_time, clock_ticks),
        rss_bytes=None if mem is None else int(mem.rss),
        threads=None if info.get("num_threads") is None else int(info["num_threads"]),
        cpu_s=None if cpu is None else float(cpu.user + cpu.system),
    )


def _sum_or_none(values: Iterable[Any]) -> int | None:
    """The sum, or None when any value is unknown (a total must not hide a process it could not read)."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += int(value)
    return total


def portable_totals(
    processes: Iterable[Mapping[str, Any]], gpu_available: bool, *, zombies: int = 0
) -> dict[str, Any]:
    """Sample ``totals`` of portable records: as harness.soak.host.procs.totals_of, a field null when some
    process could not be read for it; ``eventfd`` and ``shared_memory_fd`` are always null."""
    procs = list(processes)
    gpu = _sum_or_none(p["gpu_memory_bytes"] for p in procs) if gpu_available else None
    totals = {
        "process_count": len(procs),
        "zombies": zombies,
        "map_count": _sum_or_none(p.get("map_count") for p in procs),
        "rss_bytes": _sum_or_none(p["rss_bytes"] for p in procs),
        "threads": _sum_or_none(p["threads"] for p in procs),
        "eventfd": None,
        "shared_memory_fd": None,
        "fd_total": _sum_or_none(p["fds"]["total"] for p in procs),
        "gpu_memory_bytes": gpu,
    }
    for key in MEMORY_FIELDS:
        totals[key] = _sum_or_none(p[key] for p in procs)
    return totals


@contextlib.contextmanager
def _tolerant() -> Iterator[None]:
    with contextlib.suppress(*_UNREADABLE, OSError):
        yield


def token_of(pid: int) -> str | None:
    """The run token in ``pid``'s environment, or None (gone, another user's, no token)."""
    with _tolerant():
        return psutil.Process(pid).environ().get(RUN_TOKEN_ENV)
    return None


@dataclass
class TokenTracker(TreeTracker):
    """TreeTracker without a subreaper: also adopts any process started after the root whose
    environment carries the run's token (checked once per identity)."""

    token: str = ""
    token_of: Callable[[int], str | None] = token_of  # the edge; tests pass a pure stand-in
    checked: set[Identity] = field(default_factory=set)

    def members(self, stats: Mapping[int, ProcessStat]) -> list[ProcessStat]:
        """The run's live processes, token carriers outside the tree included."""
        found = super().members(stats)
        return super().members(stats) if self._adopt(stats) else found

    def _adopt(self, stats: Mapping[int, ProcessStat]) -> bool:
        """Record each unknown token carrier (an environment is read once per identity)."""
        adopted = False
        for pid, st in stats.items():
            identity = (pid, st.start_ticks)
            if identity in self.known or identity in self.checked or not self._candidate(st):
                continue
            self.checked.add(identity)
            if self.token and self.token_of(pid) == self.token:
                self.known[identity] = {"pid": pid, "start_ticks": st.start_ticks, "name": st.comm}
                adopted = True
        return adopted

    def _candidate(self, st: ProcessStat) -> bool:
        return (
            st.start_ticks >= self.root_start_ticks
            and st.pid not in self.exclude
            and st.pid != self.monitor_pid
            and st.state not in ("Z", "X")
        )


class PortableSampler:
    """The psutil implementation of harness.soak.host.sampling.ProcessSampler."""

    name: SamplerName = "portable"

    def pace(self, sample_interval_s: float) -> None:
        """Nothing to pace: psutil's memory and limits are read at every sample."""
        del sample_interval_s

    def __init__(self, shm_root: Path = SHM_ROOT) -> None:
        self.boot_time = psutil.boot_time()
        self.clock_ticks = os.sysconf("SC_CLK_TCK")
        shm = shm_root if shm_root.is_dir() else None
        self.capabilities = Capabilities(
            subreaper=False,
            orphan_tracking="no subreaper: known (pid, start ticks) kept wherever re-parented; processes "
            f"started after the root carrying {RUN_TOKEN_ENV} adopted",
            shm_root=shm,
            shm_reason=None if shm else NO_SHM_REASON.format(root=shm_root),
            unobservable_classes=unobservable_classes(sys.platform),
        )

    def stat(self, pid: int) -> PortableStat | None:
        try:
            proc = psutil.Process(pid)
            info = proc.as_dict(_STAT_ATTRS)
        except _UNREADABLE:
            return None
        return stat_from_info(info, self.boot_time, self.clock_ticks)

    def all_stats(self) -> dict[int, PortableStat]:
        stats: dict[int, PortableStat] = {}
        for proc in psutil.process_iter(_STAT_ATTRS):
            st = stat_from_info(proc.info, self.boot_time, self.clock_ticks)
            if st is not None:
                stats[st.pid] = st
        return stats

    def cmdline(self, pid: int) -> list[str]:
        with _tolerant():
            return list(psutil.Process(pid).cmdline())
        return []

    def is_alive(self, pid: int, start_ticks: int) -> bool:
        st = self.stat(pid)
        return st is not None and st.start_ticks == start_ticks and st.state not in ("Z", "X")

    def sample_process(
        self, st: ProcessStat, gpu_by_pid: Mapping[int, int | None] | None, *, maps: bool = True
    ) -> tuple[dict[str, Any], set[str]]:
        """One process record (the Linux reader's shape; a class psutil cannot give is null) and the
        shm names it has open (empty where there is no shm directory). ``maps`` is accepted for the
        interface: this sampler never reads maps per sample (see ``_shm_names``)."""
        if not isinstance(st, PortableStat):
            raise TypeError(f"the portable sampler samples its own psutil stats, got {type(st).__name__}")
        memory: dict[str, int | None] = dict.fromkeys(MEMORY_FIELDS)
        fds: dict[str, int | None] = dict.fromkeys(FD_CLASSES)
        fds["total"] = None
        cmdline: list[str] = []
        shm: set[str] = set()
        fd_limit: int | None = None
        with _tolerant():
            proc = psutil.Process(st.pid)
            with proc.oneshot():
                cmdline = list(proc.cmdline())
                fds["total"] = proc.num_fds()
                memory = _memory(proc)
                fd_limit = _fd_limit(proc)
                if self.capabilities.shm_root is not None:
                    shm = _shm_names(proc)
        record = {
            "pid": st.pid,
            "start_ticks": st.start_ticks,
            "ppid": st.ppid,
            "name": st.comm,
            "cmdline": cmdline,
            "rss_bytes": st.rss_bytes,
            "threads": st.threads,
            "cpu_s": st.cpu_s,
            "fds": fds,
            "gpu_memory_bytes": None if gpu_by_pid is None else gpu_by_pid.get(st.pid, 0),
            **memory,
            "map_count": None,
            "fd_limit": fd_limit,
            "rollup_age_samples": 0,  # memory and the limit are read at every sample here
        }
        return record, shm

    def totals(
        self, processes: Iterable[Mapping[str, Any]], gpu_available: bool, *, zombies: int = 0
    ) -> dict[str, Any]:
        return portable_totals(processes, gpu_available, zombies=zombies)

    def tracker(self, monitor_pid: int, root: ProcessStat, exclude: set[int], token: str) -> TreeTracker:
        return TokenTracker(monitor_pid, root.pid, root.start_ticks, exclude=exclude, token=token)

    def set_subreaper(self, enabled: bool) -> bool:
        """No subreaper here (see the module docstring); the previous setting is always False."""
        return False

    def snapshot_shm(self) -> ShmSnapshot:
        root = self.capabilities.shm_root
        return {} if root is None else snapshot_shm(root)

    def token_of(self, pid: int) -> str | None:
        return token_of(pid)

    def held_by_processes(self, names: Iterable[str], exclude_pids: Iterable[int]) -> dict[str, int]:
        """Which of ``names`` a live process outside ``exclude_pids`` has open or mapped: name -> PID."""
        wanted, excluded = set(names), set(exclude_pids)
        found: dict[str, int] = {}
        if not wanted or self.capabilities.shm_root is None:
            return found
        for proc in psutil.process_iter():
            if proc.pid in excluded:
                continue
            with _tolerant():
                for name in _shm_names(proc, mapped=True) & wanted:
                    found.setdefault(name, proc.pid)
        return found


def _memory(proc: psutil.Process) -> dict[str, int | None]:
    """USS, PSS and swap where this platform's psutil has them (AccessDenied: all null)."""
    try:
        full = proc.memory_full_info()
    except psutil.AccessDenied:
        return dict.fromkeys(MEMORY_FIELDS)
    return {f"{name}_bytes": getattr(full, name, None) for name in ("pss", "uss", "swap")}


def _fd_limit(proc: psutil.Process) -> int | None:
    """The soft open-files limit where psutil can read it (Linux, FreeBSD); None when unlimited, refused
    or not available on this platform."""
    rlimit = getattr(proc, "rlimit", None)
    nofile = getattr(psutil, "RLIMIT_NOFILE", None)
    if rlimit is None or nofile is None:
        return None
    try:
        soft = int(rlimit(nofile)[0])
    except psutil.AccessDenied:
        return None
    return None if soft == getattr(psutil, "RLIM_INFINITY", -1) else soft


def _shm_names(proc: psutil.Process, mapped: bool = False) -> set[str]:
    """``/dev/shm`` names among the files ``proc`` has open (and, with ``mapped``, maps).

    Samples read open files only: psutil's maps parse the whole ``smaps``, ~30 ms per trainer process,
    twenty times the Linux sampler's cost per sample; the one post-run scan of other processes reads both.
    """
    paths = [f.path for f in proc.open_files()]
    maps = getattr(proc, "memory_maps", None)  # psutil has no memory_maps on macOS (no /dev/shm there)
    if mapped and maps is not None:
        paths += [m.path for m in maps(grouped=True)]
    return {n for n in (shm_name(p) for p in paths) if n is not None}
