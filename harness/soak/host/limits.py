"""The limits that end a long run, read where they are set, with what their domain already uses.

A soak that passes for an hour can still die on day two: at its cgroup's memory limit, at a task limit
(processes and threads count alike), when ``/dev/shm`` or the checkpoint disk fills, at
``vm.max_map_count`` mappings or at its open-files limit. The samples show the run's use growing; these
records say what each use grows towards, so the two give the time left. Each limit is read from the file
the kernel enforces it from and names that file; a limit that cannot be read is a ``Limit`` with value
None and the reason, never a guess. ``scope`` says whether the whole run shares the limit (``tree``) or
each process has its own (``process``: the per-process records carry each process's own figure).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soakbench.foundation.limits import Limit
from soakbench.harness.soak.host.cgroups import MEMORY, PIDS, Membership, cgroup_limit, parse_membership
from soakbench.harness.soak.host.disk import fs_space
from soakbench.harness.soak.host.limits_text import OPEN_FILES, PROCESSES, LimitPair, parse_limits

RESOURCES = ("memory", "tasks", "shm_bytes", "disk", "map_count", "fds", "gpu_memory")


@dataclass(frozen=True)
class HostLimits:
    """Every limit read at ``read_at_wall`` (unix s)."""

    limits: tuple[Limit, ...]
    read_at_wall: float

    def of(self, resource: str) -> tuple[Limit, ...]:
        """The limits on ``resource`` (several for ``tasks``, ``disk`` and ``gpu_memory``)."""
        return tuple(limit for limit in self.limits if limit.resource == resource)

    def to_json(self) -> dict[str, Any]:
        return {"read_at_wall": self.read_at_wall, "limits": [limit.to_json() for limit in self.limits]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostLimits:
        limits = tuple(Limit.from_json(item) for item in data["limits"])
        return cls(limits=limits, read_at_wall=float(data["read_at_wall"]))


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return None if text is None else int(text.split()[0])
    except (ValueError, IndexError):
        return None


def format_bytes(count: int) -> str:
    """``count`` bytes for a source text: ``0 B``, ``512 B``, ``2.0 GiB``."""
    value, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"


def _membership(proc_root: Path, pid: int) -> Membership | None:
    text = _read(proc_root / str(pid) / "cgroup")
    return None if text is None else parse_membership(text)


def _meminfo(proc_root: Path) -> dict[str, int]:
    """``/proc/meminfo`` in bytes (empty when unreadable)."""
    found: dict[str, int] = {}
    for line in (_read(proc_root / "meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            found[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return found


def _memtotal_limit(proc_root: Path) -> Limit:
    """The host's memory, when no cgroup caps the run: swap is not counted (a run that swaps has
    already lost its pace, and whether it swaps at all is the kernel's choice)."""
    info = _meminfo(proc_root)
    total, available = info.get("MemTotal"), info.get("MemAvailable")
    source = f"{proc_root}/meminfo MemTotal (swap {format_bytes(info.get('SwapTotal', 0))} not counted)"
    if total is None:
        return Limit("memory", "tree", None, source, None, f"no MemTotal in {proc_root}/meminfo")
    in_use = None if available is None else total - available
    return Limit("memory", "tree", total, source, in_use, None)


def memory_limit(pid: int, *, proc_root: Path, sys_root: Path) -> Limit:
    """The cgroup memory limit of ``pid`` when one is set at some level, else the host's MemTotal."""
    membership = _membership(proc_root, pid)
    if membership is not None:
        found = cgroup_limit(membership, MEMORY, sys_root=sys_root)
        if found.value is not None:
            return Limit(
                "memory", "tree", found.value, found.source, found.in_use, None, usage_file=found.usage_file
            )
    return _memtotal_limit(proc_root)


def _cgroup_tasks_limit(pid: int, *, proc_root: Path, sys_root: Path) -> Limit:
    membership = _membership(proc_root, pid)
    if membership is None:
        reason = f"{proc_root}/{pid}/cgroup cannot be read"
        return Limit("tasks", "tree", None, "cgroup pids.max", None, reason)
    found = cgroup_limit(membership, PIDS, sys_root=sys_root)
    return Limit(
        "tasks", "tree", found.value, found.source, found.in_use, found.reason, usage_file=found.usage_file
    )


def _status_fields(path: Path) -> dict[str, str]:
    """``/proc/<pid>/status`` as key -> value text (empty when unreadable)."""
    fields: dict[str, str] = {}
    for line in (_read(path) or "").splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields[key] = value.strip()
    return fields


def _real_uid(proc_root: Path, pid: int) -> int | None:
    uids = _status_fields(proc_root / str(pid) / "status").get("Uid", "").split()
    return int(uids[0]) if uids and uids[0].isdigit() else None


def _tasks_of_uid(proc_root: Path, uid: int) -> int:
    """Tasks (threads) of every process whose real uid is ``uid``: what RLIMIT_NPROC counts."""
    count = 0
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit():
            continue
        fields = _status_fields(Path(entry.path) / "status")
        uids, threads = fields.get("Uid", "").split(), fields.get("Threads", "")
        if uids and uids[0] == str(uid) and threads.isdigit():
            count += int(threads)
    return count


def _is_host_root(proc_root: Path, pid: int, uid: int) -> bool:
    """Whether real uid ``uid`` of ``pid`` is uid 0 of the initial user namespace, which the kernel
    exempts from RLIMIT_NPROC (capabilities are not considered)."""
    if uid != 0:
        return False
    for line in (_read(proc_root / str(pid) / "uid_map") or "0 0 4294967295").splitlines():
        inside, outside, length = (int(part) for part in line.split())
        if inside <= 0 < inside + length:
            return outside - inside == 0
    return False


def _nproc_limit(pid: int, *, proc_root: Path) -> Limit:
    """RLIMIT_NPROC: the tasks a user may own, checked at each fork or thread start of ``pid``'s tree."""
    path = proc_root / str(pid) / "limits"
    source = f"RLIMIT_NPROC soft ({path})"
    pair, uid = _limit_pair(path, PROCESSES), _real_uid(proc_root, pid)
    if pair is None or uid is None:
        return Limit("tasks", "tree", None, source, None, f"{path} or its status cannot be read")
    soft = pair[0]
    if soft is None:
        return Limit("tasks", "tree", None, source, None, "RLIMIT_NPROC unlimited")
    if _is_host_root(proc_root, pid, uid):
        reason = f"RLIMIT_NPROC soft {soft} is not enforced: the kernel exempts root (uid 0)"
        return Limit("tasks", "tree", None, source, None, reason)
    return Limit("tasks", "tree", soft, source, _tasks_of_uid(proc_root, uid), None)


def _threads_max_limit(proc_root: Path) -> Limit:
    """kernel.threads-max, the host's task table, against the task count of ``loadavg``."""
    value = _read_int(proc_root / "sys" / "kernel" / "threads-max")
    if value is None:
        reason = f"{proc_root}/sys/kernel/threads-max cannot be read"
        return Limit("tasks", "tree", None, "kernel.threads-max", None, reason)
    loadavg = (_read(proc_root / "loadavg") or "").split()
    total = loadavg[3].partition("/")[2] if len(loadavg) > 3 else ""
    return Limit("tasks", "tree", value, "kernel.threads-max", int(total) if total.isdigit() else None, None)


def task_limits(pid: int, *, proc_root: Path, sys_root: Path) -> tuple[Limit, ...]:
    """Every limit on the run's tasks: cgroup ``pids.max``, RLIMIT_NPROC, ``kernel.threads-max``."""
    return (
        _cgroup_tasks_limit(pid, proc_root=proc_root, sys_root=sys_root),
        _nproc_limit(pid, proc_root=proc_root),
        _threads_max_limit(proc_root),
    )


def _limit_pair(path: Path, name: str) -> LimitPair | None:
    text = _read(path)
    return None if text is None else parse_limits(text).get(name)


def shm_limit(shm_root: Path | None) -> Limit:
    """The ``/dev/shm`` tmpfs: its size and what every user of it holds."""
    if shm_root is None:
        reason = "no shm root: POSIX shared memory is not a file system this sampler can see on this host"
        return Limit("shm_bytes", "tree", None, "statvfs (no shm root)", None, reason)
    space = fs_space(shm_root) if shm_root.is_dir() else None
    if space is None:
        return Limit("shm_bytes", "tree", None, f"statvfs {shm_root}", None, f"statvfs of {shm_root} failed")
    return Limit("shm_bytes", "tree", space.size_bytes, f"statvfs {shm_root}", space.used_bytes, None)


def disk_limit(path: Path) -> Limit:
    """The file system ``path`` is (or will be) on, as an unprivileged writer sees it: ``in_use`` is all
    but what it may still write (``f_bavail``), the root-reserved blocks included."""
    space = fs_space(path)
    if space is None:
        return Limit("disk", "tree", None, f"statvfs {path}", None, "statvfs failed", path=str(path))
    source = f"statvfs {space.measured_at}"
    if space.measured_at != Path(os.path.abspath(path)):
        source += f" (nearest existing ancestor of {path})"
    in_use = space.size_bytes - space.free_bytes
    return Limit("disk", "tree", space.size_bytes, source, in_use, None, path=str(path))


def map_count_limit(proc_root: Path) -> Limit:
    """``vm.max_map_count``: each process's own ceiling on mappings (``map_count`` per process)."""
    value = _read_int(proc_root / "sys" / "vm" / "max_map_count")
    reason = None if value is not None else f"{proc_root}/sys/vm/max_map_count cannot be read"
    return Limit("map_count", "process", value, "vm.max_map_count", None, reason)


def fds_limit(pid: int, *, proc_root: Path) -> Limit:
    """The root's soft RLIMIT_NOFILE; informational, as each process record carries its own."""
    path = proc_root / str(pid) / "limits"
    source = f"RLIMIT_NOFILE soft ({path})"
    pair = _limit_pair(path, OPEN_FILES)
    if pair is None:
        return Limit("fds", "process", None, source, None, f"{path} cannot be read")
    reason = "RLIMIT_NOFILE unlimited" if pair[0] is None else None
    return Limit("fds", "process", pair[0], source, None, reason)


def gpu_limits(totals: Sequence[tuple[int, int]] | None, reason: str | None) -> tuple[Limit, ...]:
    """One limit per GPU from NVML's totals, or one not-observable limit with the reason."""
    if not totals:
        why = reason or ("NVML unavailable" if totals is None else "NVML lists no device")
        return (Limit("gpu_memory", "tree", None, "NVML", None, why),)
    return tuple(
        Limit("gpu_memory", "tree", int(total), f"NVML device {index} total", None, None)
        for index, total in totals
    )


def read_limits(  # noqa: PLR0913 — keyword-only: the run, its paths, the host roots and the GPU facts
    *,
    root_pid: int,
    watch_paths: Sequence[Path],
    shm_root: Path | None,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    gpu_totals: Sequence[tuple[int, int]] | None = None,
    gpu_reason: str | None = None,
) -> HostLimits:
    """Every limit of the run rooted at ``root_pid`` (``watch_paths``: one ``disk`` limit each)."""
    limits = (
        memory_limit(root_pid, proc_root=proc_root, sys_root=sys_root),
        *task_limits(root_pid, proc_root=proc_root, sys_root=sys_root),
        shm_limit(shm_root),
        *(disk_limit(path) for path in watch_paths),
        map_count_limit(proc_root),
        fds_limit(root_pid, proc_root=proc_root),
        *gpu_limits(gpu_totals, gpu_reason),
    )
    return HostLimits(limits=limits, read_at_wall=time.time())
