"""Process-tree discovery and /proc sampling for the soak monitor (Linux only; never imports torch).

A process is identified by ``(pid, start_ticks)`` where ``start_ticks`` is field 22 of
``/proc/<pid>/stat`` (start time after boot, in clock ticks). A PID that reappears with other start ticks
is a different process: it is never merged with the one seen before, and a residual check only reports a
process whose PID *and* start ticks still match.

Pure pieces (``parse_stat``, ``parse_smaps_rollup``, ``classify_fd``, ``descendants``,
``shm_names_from_maps``, ``role_of``) take text/data and return data; ``ProcReader`` is the edge that reads ``/proc``.

Besides memory, the rollup read (on the cost schedule of harness.soak.host.rollup) counts the process's
memory mappings and reads its open-files limit: a process dies at ``vm.max_map_count`` mappings or at its
``RLIMIT_NOFILE`` fds, and both move slowly enough that the schedule's staleness changes no verdict.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soakbench.harness.soak.host.interface import ProcessStat

from soakbench.foundation.roles import Role, role_from_title
from soakbench.harness.soak.host.limits_text import OPEN_FILES, soft_limit
from soakbench.harness.soak.host.rollup import RollupSchedule

FD_CLASSES: tuple[str, ...] = (
    "pipe",
    "socket",
    "eventfd",
    "eventpoll",
    "memfd",
    "shared_memory",
    "nvidia",
    "other",
)
SHM_DIR = "/dev/shm/"
#: ``/proc/<pid>/smaps_rollup`` fields (kB) behind the per-process memory measures
_ROLLUP_FIELDS = ("Pss", "Private_Clean", "Private_Dirty", "Swap")
#: what one rollup read yields, each None where its file could not be read
NO_ROLLUP: dict[str, int | None] = {
    "pss_bytes": None,
    "uss_bytes": None,
    "swap_bytes": None,
    "map_count": None,
    "fd_limit": None,
}
#: the rollup values a sample's ``totals`` sums over the tree (a limit per process is not summed)
SUMMED_ROLLUP_KEYS = ("pss_bytes", "uss_bytes", "swap_bytes", "map_count")
_CHUNK_BYTES = 1 << 16
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def classify_fd(target: str) -> str:
    """Class of one fd from its ``readlink(/proc/<pid>/fd/<n>)`` target.

    ``pipe:[123]`` -> pipe, ``socket:[123]`` -> socket, ``anon_inode:[eventfd]`` -> eventfd,
    ``anon_inode:[eventpoll]`` -> eventpoll, ``/memfd:name (deleted)`` -> memfd, ``/dev/shm/...`` ->
    shared_memory, ``/dev/nvidia*`` -> nvidia, anything else (files, ttys, other anon inodes) -> other.
    """
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    if target == "anon_inode:[eventfd]":
        return "eventfd"
    if target == "anon_inode:[eventpoll]":
        return "eventpoll"
    if target.startswith("/memfd:") or target.startswith("anon_inode:[memfd"):
        return "memfd"
    if target.startswith(SHM_DIR):
        return "shared_memory"
    if target.startswith("/dev/nvidia"):
        return "nvidia"
    return "other"


def shm_name(target: str) -> str | None:
    """The ``/dev/shm`` entry name an fd target or maps path refers to, without a `` (deleted)`` suffix.

    Returns None for anything outside ``/dev/shm`` or nested below it.
    """
    if not target.startswith(SHM_DIR):
        return None
    name = target[len(SHM_DIR) :]
    if name.endswith(" (deleted)"):
        name = name[: -len(" (deleted)")]
    if not name or "/" in name:
        return None
    return name


def count_fds(targets: Iterable[str]) -> dict[str, int]:
    """Per-class fd counts plus ``total`` for the given fd targets."""
    counts = dict.fromkeys(FD_CLASSES, 0)
    total = 0
    for target in targets:
        counts[classify_fd(target)] += 1
        total += 1
    counts["total"] = total
    return counts


def shm_names_from_maps(maps_text: str) -> set[str]:
    """``/dev/shm`` entry names mapped in a ``/proc/<pid>/maps`` listing (path is the 6th column)."""
    names: set[str] = set()
    if SHM_DIR not in maps_text:  # most listings map nothing there: skip splitting thousands of lines
        return names
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6:
            name = shm_name(parts[5].strip())
            if name is not None:
                names.add(name)
    return names


def parse_smaps_rollup(text: str) -> dict[str, int | None]:
    """PSS, USS (private clean + private dirty) and swap in bytes from a ``smaps_rollup`` text.

    A field the kernel did not print makes its measure None (never 0: absent is not the same as none).
    """
    kb: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in _ROLLUP_FIELDS:
            parts = rest.split()
            if parts and parts[0].isdigit():
                kb[key] = int(parts[0])
    uss = None
    if "Private_Clean" in kb and "Private_Dirty" in kb:
        uss = (kb["Private_Clean"] + kb["Private_Dirty"]) * 1024
    return {
        "pss_bytes": kb["Pss"] * 1024 if "Pss" in kb else None,
        "uss_bytes": uss,
        "swap_bytes": kb["Swap"] * 1024 if "Swap" in kb else None,
    }


@dataclass(frozen=True)
class StatFields:
    """The fields of ``/proc/<pid>/stat`` the monitor uses (ticks are clock ticks, rss in pages)."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    session: int
    utime_ticks: int
    stime_ticks: int
    num_threads: int
    start_ticks: int
    rss_pages: int


def parse_stat(text: str) -> StatFields:
    """Parse one ``/proc/<pid>/stat`` line.

    ``comm`` may contain spaces and parentheses, so the fixed fields are split after the *last* ``)``.
    Raises ValueError on a malformed line.
    """
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise ValueError(f"malformed /proc stat line: {text[:80]!r}")
    rest = text[close_at + 1 :].split()
    if len(rest) < 22:
        raise ValueError(f"/proc stat line has {len(rest) + 2} fields, need at least 24")
    return StatFields(
        pid=int(text[:open_at]),
        comm=text[open_at + 1 : close_at],
        state=rest[0],
        ppid=int(rest[1]),
        pgrp=int(rest[2]),
        session=int(rest[3]),
        utime_ticks=int(rest[11]),
        stime_ticks=int(rest[12]),
        num_threads=int(rest[17]),
        start_ticks=int(rest[19]),
        rss_pages=int(rest[21]),
    )


def descendants(parents: Mapping[int, int], roots: Iterable[int]) -> set[int]:
    """Every PID in ``parents`` (pid -> ppid) reachable from ``roots`` by parent links, roots included
    when present in ``parents``."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [r for r in roots if r in parents]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    return found


Identity = tuple[int, int]  # (pid, start_ticks)


def role_of(comm: str, pid: int, ppid: int, root_pid: int) -> Role:
    """A process's role: the runtime's marker in its title (foundation.roles) wins; otherwise the tree
    decides, so any command under ``soak monitor`` gets roles: the monitored root is the ``trainer``, its
    direct children are ``worker`` and everything else (grandchildren, adopted orphans) is ``other``."""
    marked = role_from_title(comm)
    if marked is not None:
        return marked
    if pid == root_pid:
        return "trainer"
    return "worker" if ppid == root_pid else "other"


def assign_roles(records: Iterable[dict[str, Any]], root_pid: int) -> None:
    """Set ``role`` on each per-process sample record (needs its ``name``, ``pid`` and ``ppid``)."""
    for record in records:
        record["role"] = role_of(str(record["name"]), int(record["pid"]), int(record["ppid"]), root_pid)


@dataclass
class TreeTracker:
    """Which processes belong to the monitored run, across samples.

    Membership: the command's root process and its descendants; processes re-parented to the monitor (it
    is a child subreaper, so double-forked / setsid'ed descendants land here) that started no earlier than
    the root; and every identity already known that is still alive (same PID *and* start ticks), whatever
    its parent now is. ``exclude`` holds PIDs of the monitor's own helpers (never part of the run).

    ``zombies`` are the tree's defunct processes (state ``Z``) at the latest ``members`` call: a parent
    that never waits on its children fills the process table with them, so they count against the task
    limits while having no memory or fds to sample.
    """

    monitor_pid: int
    root_pid: int
    root_start_ticks: int
    exclude: set[int] = field(default_factory=set)
    known: dict[Identity, dict[str, Any]] = field(default_factory=dict)
    zombies: list[ProcessStat] = field(default_factory=list)

    def members(self, stats: Mapping[int, ProcessStat]) -> list[ProcessStat]:
        """The run's live (non-zombie) processes among ``stats`` (pid -> parsed stat); records new ones
        and sets ``zombies``."""
        parents = {pid: st.ppid for pid, st in stats.items()}
        roots: set[int] = set()
        root = stats.get(self.root_pid)
        if root is not None and root.start_ticks == self.root_start_ticks:
            roots.add(self.root_pid)
        for pid, st in stats.items():
            if pid in self.exclude or pid == self.monitor_pid:
                continue
            if st.ppid == self.monitor_pid and st.start_ticks >= self.root_start_ticks:
                roots.add(pid)  # adopted orphan (subreaper) or the root itself
            elif (pid, st.start_ticks) in self.known:
                roots.add(pid)  # known identity, wherever it lives now
        found = descendants(parents, roots) - {self.monitor_pid} - self.exclude
        result, zombies = [], []
        for pid in sorted(found):
            st = stats[pid]
            identity = (pid, st.start_ticks)
            if identity not in self.known:
                self.known[identity] = {"pid": pid, "start_ticks": st.start_ticks, "name": st.comm}
            if st.state not in ("Z", "X"):
                result.append(st)
            elif st.state == "Z":
                zombies.append(st)
        self.zombies = zombies
        return result


class ProcReader:
    """Reads ``/proc`` (the edge). Every read tolerates a process vanishing mid-read."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.root = proc_root
        self._root = str(proc_root)  # reads build plain strings: pathlib's joins cost more than a read
        self.clock_ticks = os.sysconf("SC_CLK_TCK")
        self.page_size = os.sysconf("SC_PAGE_SIZE")
        self.rollups = RollupSchedule(self.memory_rollup)  # PSS reads are costly: harness.soak.host.rollup

    def stat(self, pid: int) -> StatFields | None:
        """Parsed stat of ``pid`` or None if it does not exist (any more)."""
        try:
            return parse_stat(_read_text(f"{self._root}/{pid}/stat"))
        except (OSError, ValueError):
            return None

    def all_stats(self) -> dict[int, StatFields]:
        """Parsed stat of every process visible now (pid -> fields)."""
        stats: dict[int, StatFields] = {}
        for entry in os.scandir(self.root):
            if entry.name.isdigit():
                st = self.stat(int(entry.name))
                if st is not None:
                    stats[st.pid] = st
        self.rollups.start_sample({(pid, st.start_ticks) for pid, st in stats.items()})
        return stats

    def fd_targets(self, pid: int) -> list[str]:
        """readlink of every open fd of ``pid`` (fds closed mid-scan are skipped)."""
        fd_dir = f"{self._root}/{pid}/fd"
        targets: list[str] = []
        try:
            names = os.listdir(fd_dir)
        except OSError:
            return targets
        for name in names:
            try:
                targets.append(os.readlink(f"{fd_dir}/{name}"))
            except OSError:
                continue
        return targets

    def maps_shm(self, pid: int) -> set[str]:
        """``/dev/shm`` names mapped by ``pid``."""
        try:
            return shm_names_from_maps(_read_text(f"{self._root}/{pid}/maps"))
        except OSError:
            return set()

    def memory_rollup(self, pid: int) -> dict[str, int | None]:
        """``pss_bytes``, ``uss_bytes``, ``swap_bytes`` of ``pid`` from ``smaps_rollup`` (one read; the
        kernel sums the mappings, so the cost grows with resident pages, not with the mapping count),
        ``map_count`` (lines of ``maps``) and ``fd_limit`` (soft ``Max open files`` of ``limits``, None
        when unlimited). Each is None where its file cannot be read (kernel before 4.14, no ptrace read
        access, gone)."""
        values = dict(NO_ROLLUP)
        with contextlib.suppress(OSError):
            values.update(parse_smaps_rollup(_read_text(f"{self._root}/{pid}/smaps_rollup")))
        values["map_count"] = count_lines(f"{self._root}/{pid}/maps")
        with contextlib.suppress(OSError, ValueError):
            values["fd_limit"] = soft_limit(_read_text(f"{self._root}/{pid}/limits"), OPEN_FILES)
        return values

    def cmdline(self, pid: int) -> list[str]:
        """argv of ``pid`` (empty for kernel threads / vanished processes)."""
        try:
            with open(f"{self._root}/{pid}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            return []
        return [part.decode(errors="replace") for part in raw.split(b"\0") if part]

    def is_alive(self, pid: int, start_ticks: int) -> bool:
        """True if ``pid`` exists with the same start ticks and is not a zombie."""
        st = self.stat(pid)
        return st is not None and st.start_ticks == start_ticks and st.state not in ("Z", "X")

    def sample_process(
        self, st: StatFields, gpu_by_pid: Mapping[int, int | None] | None, *, maps: bool = True
    ) -> tuple[dict[str, Any], set[str]]:
        """One process record of a sample (schema in docs/soak-reference.md, "What one sample holds") and
        the shm names it has open (and, with ``maps``, mapped: the sampler asks for the maps only while a
        segment is unexplained).

        ``gpu_by_pid`` is None when per-process GPU memory is unavailable (record gets null).
        """
        targets = self.fd_targets(st.pid)
        rss_bytes = st.rss_pages * self.page_size
        rollup, rollup_age = self.rollups.values(st.pid, st.start_ticks, rss_bytes)
        shm = {n for n in (shm_name(t) for t in targets) if n is not None}
        if maps:
            shm |= self.maps_shm(st.pid)
        if gpu_by_pid is None:
            gpu: int | None = None
        else:
            gpu = gpu_by_pid.get(st.pid, 0)
        record = {
            "pid": st.pid,
            "start_ticks": st.start_ticks,
            "ppid": st.ppid,
            "name": st.comm,
            "cmdline": self.cmdline(st.pid),
            "rss_bytes": rss_bytes,
            **rollup,
            "rollup_age_samples": rollup_age,
            "threads": st.num_threads,
            "cpu_s": (st.utime_ticks + st.stime_ticks) / self.clock_ticks,
            "fds": count_fds(targets),
            "gpu_memory_bytes": gpu,
        }
        return record, shm


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def count_lines(path: str) -> int | None:
    """Newlines in ``path``, read in binary chunks (a process with 60 000 mappings has a 6 MB ``maps``:
    no list of lines is built); None when it cannot be read."""
    count = 0
    try:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(_CHUNK_BYTES):
                count += chunk.count(b"\n")
    except OSError:
        return None
    return count


def _prctl() -> Any:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fn = libc.prctl
    fn.restype = ctypes.c_int
    return fn


def set_child_subreaper(enabled: bool) -> bool:
    """Make this process a child subreaper (or stop being one); return the previous setting.

    Raises OSError when the kernel refuses (the monitor then fails closed: without it, double-forked
    descendants would escape to init and could not be seen or reaped).
    """
    prctl = _prctl()
    previous = ctypes.c_int(0)
    if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_GET_CHILD_SUBREAPER) failed: {os.strerror(err)}")
    if prctl(PR_SET_CHILD_SUBREAPER, 1 if enabled else 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(err)}")
    return bool(previous.value)


def _sum_or_none(procs: Sequence[Mapping[str, Any]], key: str) -> int | None:
    """Sum of ``key`` over the records; None when any record lacks a value (a partial sum would read as
    a drop or a rise when one process becomes unreadable)."""
    values = [p.get(key) for p in procs]
    if any(v is None for v in values):
        return None
    return sum(int(v) for v in values if v is not None)


def totals_of(
    processes: Iterable[Mapping[str, Any]], gpu_available: bool, *, zombies: int = 0
) -> dict[str, Any]:
    """Sample ``totals`` from per-process records and the tree's count of ``zombies`` (defunct processes
    have no record); ``gpu_memory_bytes`` is null unless every record has a number and per-process GPU
    attribution is available."""
    procs = list(processes)
    gpu_values = [p["gpu_memory_bytes"] for p in procs]
    gpu_total: int | None
    if gpu_available and all(v is not None for v in gpu_values):
        gpu_total = sum(int(v) for v in gpu_values)
    else:
        gpu_total = None
    return {
        "process_count": len(procs),
        "rss_bytes": sum(int(p["rss_bytes"]) for p in procs),
        **{key: _sum_or_none(procs, key) for key in SUMMED_ROLLUP_KEYS},
        "zombies": zombies,
        "threads": sum(int(p["threads"]) for p in procs),
        "eventfd": sum(int(p["fds"]["eventfd"]) for p in procs),
        "shared_memory_fd": sum(int(p["fds"]["shared_memory"]) for p in procs),
        "fd_total": sum(int(p["fds"]["total"]) for p in procs),
        "gpu_memory_bytes": gpu_total,
    }
