"""Host memory pressure and the kernel's OOM-kill counters, read once per soak sample (Linux).

The per-sample ``host`` block (docs/soak-reference.md, "Out-of-memory kills")::

    {"reading": n (0, 1, ... in read order; kernel-log kills name the reading that found them),
     "mem_available_bytes": int | null,          # /proc/meminfo MemAvailable
     "psi_memory": {"some": {avg10, avg60, avg300, total}, "full": {...}} | null,  # /proc/pressure/memory
     "oom_kill_count": int | null,               # /proc/vmstat oom_kill (host-wide, since boot)
     "cgroup_oom_kill_count": int | null,        # sum of oom_kill over the watched memory cgroups
     "cgroups": [{"path", "version", "oom_kill": int | null}],
     "reasons": {field: why it is null}}

The watched memory cgroups are the monitor's own and every cgroup a tree process was seen in. On cgroup
v1 (``memory.oom_control``) a kill counts only in the victim's own cgroup, so the monitor's cgroup alone
would miss a kill in a child cgroup; v2 (``memory.events``) counts it in every ancestor too.

Pure parsers take file text; ``HostReader`` and ``KmsgTail`` are the edges that read the files.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PSI_PATH = Path("/proc/pressure/memory")
CGROUP_ROOT = Path("/sys/fs/cgroup")
_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_INITIAL_PID_NS_INODE = 0xEFFFFFFC  # PROC_PID_INIT_INO in include/linux/proc_ns.h
_KMSG_MAX_RECORDS = 20_000  # per poll: bounds the time one sample can spend on a flooded log


def parse_meminfo_available(text: str) -> int | None:
    """``MemAvailable`` of a ``/proc/meminfo`` listing in bytes, or None when the kernel has no such line."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            return int(parts[1]) * 1024  # the kernel reports kB
    return None


def parse_psi(text: str) -> dict[str, dict[str, float | int]]:
    """``/proc/pressure/*`` text as ``{"some": {avg10, avg60, avg300, total}, "full": {...}}``.

    ``avg*`` are percentages of wall time some/all tasks stalled; ``total`` is stall microseconds.
    Raises ValueError on a line that is not ``some|full key=value ...``.
    """
    result: dict[str, dict[str, float | int]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        kind, *pairs = line.split()
        if kind not in ("some", "full"):
            raise ValueError(f"PSI line does not start with some/full: {line!r}")
        values: dict[str, float | int] = {}
        for pair in pairs:
            key, _, raw = pair.partition("=")
            values[key] = int(raw) if key == "total" else float(raw)
        result[kind] = values
    return result


def parse_oom_kill(text: str) -> int | None:
    """The ``oom_kill N`` line of ``/proc/vmstat``, ``memory.events`` (v2) or ``memory.oom_control`` (v1)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill":
            return int(parts[1])
    return None


def memory_cgroup(proc_cgroup_text: str) -> tuple[str, int] | None:
    """(path inside the hierarchy, cgroup version) of the memory cgroup in a ``/proc/<pid>/cgroup`` listing.

    A v1 line names the ``memory`` controller (``4:memory:/a/b``); where none does, the v2 line
    (``0::/a/b``) is the memory cgroup. None when neither is present.
    """
    unified: str | None = None
    for line in proc_cgroup_text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "memory" in controllers.split(","):
            return path, 1
        if hierarchy == "0" and controllers == "":
            unified = path
    return (unified, 2) if unified is not None else None


def counter_file(path: str, version: int, root: Path = CGROUP_ROOT) -> Path:
    """The file holding the ``oom_kill`` counter of a memory cgroup.

    On a hybrid host the v2 tree is mounted at ``<root>/unified``; on a pure v2 host at ``<root>``.
    """
    rel = path.lstrip("/")
    if version == 1:
        return root / "memory" / rel / "memory.oom_control"
    base = root / "unified" if (root / "unified" / "cgroup.procs").exists() else root
    return base / rel / "memory.events"


def killed_in_kmsg(record: str) -> tuple[int, str] | None:
    """(pid, comm) of a ``/dev/kmsg`` record that reports an OOM kill ("Killed process <pid> (<comm>)")."""
    _prefix, _, message = record.partition(";")
    match = _KILLED.search(message)
    return (int(match.group(1)), match.group(2)) if match else None


def _read_text(path: Path) -> tuple[str | None, str | None]:
    try:
        return path.read_text(), None
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"


def _pid_namespace_is_initial(proc_root: Path) -> bool:
    """True in the kernel's initial PID namespace, whose PIDs the kernel log prints.

    Its inode is the fixed ``PROC_PID_INIT_INO``; ``NSpid`` would not do, as a container's own /proc
    shows a single entry there too.
    """
    try:
        return os.readlink(proc_root / "self" / "ns" / "pid") == f"pid:[{_INITIAL_PID_NS_INODE}]"
    except OSError:
        return False


@dataclass
class KmsgTail:
    """OOM-kill records of the kernel log written after ``open()``; corroborating evidence, never required.

    ``reason`` says why the log is not used (unreadable, or PIDs of another PID namespace). Each kill is
    ``{"pid", "comm", "reading": index of the host reading whose poll found it, "text"}``.
    """

    path: Path = Path("/dev/kmsg")
    proc_root: Path = Path("/proc")
    fd: int | None = None
    reason: str | None = "the kernel log was not opened"
    kills: list[dict[str, Any]] = field(default_factory=list)
    lost_records: int = 0

    def open(self) -> None:
        if not _pid_namespace_is_initial(self.proc_root):
            self.reason = "the monitor is not in the initial PID namespace; kernel log PIDs are not its PIDs"
            return
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)  # only what happens while the monitor watches
            self.reason = None
        except OSError as exc:
            self.close()
            self.reason = f"{self.path}: {exc.strerror or exc}"

    def poll(self, reading: int) -> None:
        """Read every record available now (bounded), keeping the OOM-kill ones."""
        for _ in range(_KMSG_MAX_RECORDS):
            if self.fd is None:
                return
            try:
                raw = os.read(self.fd, 8192)  # one record per read; records are < 8 KiB
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten before we read it: count, go on
                    self.lost_records += 1
                    continue
                self.reason = f"{self.path}: {exc.strerror or exc}"
                self.close()
                return
            record = raw.decode(errors="replace").rstrip("\n")
            found = killed_in_kmsg(record)
            if found is not None:
                text = record.partition(";")[2]
                self.kills.append({"pid": found[0], "comm": found[1], "reading": reading, "text": text})

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def status(self) -> dict[str, Any]:
        return {"used": self.reason is None, "reason": self.reason, "lost_records": self.lost_records}


@dataclass
class HostReader:
    """Reads the ``host`` block (module docstring). ``readings`` counts the blocks read so far."""

    proc_root: Path = Path("/proc")
    cgroup_root: Path = CGROUP_ROOT
    psi_path: Path = PSI_PATH
    kmsg: KmsgTail = field(default_factory=KmsgTail)
    cgroups: dict[tuple[str, int], Path] = field(default_factory=dict)
    readings: int = 0

    def start(self) -> None:
        """Watch the monitor's own memory cgroup and open the kernel log (call before spawning)."""
        self._watch_cgroup_of("self")
        self.kmsg.open()

    def _watch_cgroup_of(self, pid: int | str) -> None:
        text, _ = _read_text(Path(f"{self.proc_root}/{pid}/cgroup"))  # one join: this runs per process
        found = memory_cgroup(text) if text is not None else None
        if found is not None and found not in self.cgroups:
            self.cgroups[found] = counter_file(found[0], found[1], self.cgroup_root)

    def read(self, pids: Iterable[int]) -> dict[str, Any]:
        """One host block; ``pids`` are the tree's live processes (their cgroups join the watched set)."""
        for pid in pids:
            self._watch_cgroup_of(pid)
        self.kmsg.poll(self.readings)
        reasons: dict[str, str] = {}
        block: dict[str, Any] = {
            "reading": self.readings,
            "mem_available_bytes": self._meminfo(reasons),
            "psi_memory": self._psi(reasons),
            "oom_kill_count": self._vmstat(reasons),
        }
        cgroups = [self._cgroup_entry(key, path) for key, path in self.cgroups.items()]
        counts = [c["oom_kill"] for c in cgroups if c["oom_kill"] is not None]
        block["cgroup_oom_kill_count"] = sum(counts) if counts else None
        if not counts:
            reasons["cgroup_oom_kill_count"] = "no readable memory cgroup oom_kill counter"
        block["cgroups"] = cgroups
        block["reasons"] = reasons
        self.readings += 1
        return block

    def tail(self, t: float, alive: Iterable[tuple[int, int]], *, monitor_signalled: bool) -> dict[str, Any]:
        """A reading after the sampling loop (harness.soak.verdicts.oom): the identities alive now and a host block."""
        identities = [[pid, ticks] for pid, ticks in alive]
        host = self.read(pid for pid, _ in identities)
        return {"t": round(t, 3), "alive": identities, "monitor_signalled": monitor_signalled, "host": host}

    def _meminfo(self, reasons: dict[str, str]) -> int | None:
        text, why = _read_text(self.proc_root / "meminfo")
        value = parse_meminfo_available(text) if text is not None else None
        if value is None:
            reasons["mem_available_bytes"] = why or "/proc/meminfo has no MemAvailable line"
        return value

    def _psi(self, reasons: dict[str, str]) -> dict[str, dict[str, float | int]] | None:
        text, why = _read_text(self.psi_path)
        if text is None:
            reasons["psi_memory"] = f"no PSI on this kernel ({why})"
            return None
        try:
            return parse_psi(text)
        except ValueError as exc:
            reasons["psi_memory"] = f"{self.psi_path}: {exc}"
            return None

    def _vmstat(self, reasons: dict[str, str]) -> int | None:
        text, why = _read_text(self.proc_root / "vmstat")
        value = parse_oom_kill(text) if text is not None else None
        if value is None:
            reasons["oom_kill_count"] = why or "/proc/vmstat has no oom_kill line"
        return value

    @staticmethod
    def _cgroup_entry(key: tuple[str, int], path: Path) -> dict[str, Any]:
        text, _ = _read_text(path)
        value = parse_oom_kill(text) if text is not None else None
        return {"path": str(path.parent), "version": key[1], "oom_kill": value}

    def close(self) -> None:
        self.kmsg.close()
