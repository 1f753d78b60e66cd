"""The cgroup limits a process lives under: the tightest ``memory`` or ``pids`` limit of its cgroup and
every ancestor, v1 or v2.

A container or a systemd slice caps a run far below what the host has, and a process hits the cap of
whichever level is tightest: a job slice of 8 GiB under a user slice of 16 GiB is killed at 8 GiB,
whatever the leaf says (``max``, the default, sets none at that level). So the walk reads the limit file
at every level from the process's cgroup up to the mount's root and keeps the smallest number, with the
usage of the level that set it (the level whose count the kernel compares).

Where the process's cgroup is found: ``/proc/<pid>/cgroup``, a line ``0::/path`` on v2 and
``N:controller[,controller]:/path`` per v1 hierarchy. A v1 line for the controller wins (on a hybrid host
the v2 hierarchy carries no controllers). The path is relative to the cgroup mount as this process sees
it (a cgroup namespace makes the container's cgroup the root); when it does not exist under the mount,
the ancestors that do are read and the source says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: a v1 limit at or above this is the kernel's "unlimited" (PAGE_COUNTER_MAX rounded to pages)
V1_UNLIMITED = 1 << 60


@dataclass(frozen=True)
class Controller:
    """One controller's files: the limit and the usage it is compared with, on v2 and on v1."""

    name: str
    v2_limit: str
    v2_usage: str
    v1_limit: str
    v1_usage: str


MEMORY = Controller(
    "memory", "memory.max", "memory.current", "memory.limit_in_bytes", "memory.usage_in_bytes"
)
PIDS = Controller("pids", "pids.max", "pids.current", "pids.max", "pids.current")


@dataclass(frozen=True)
class Membership:
    """Where a process sits: its v2 path (None without a ``0::`` line) and each v1 controller's path."""

    v2_path: str | None
    v1_paths: dict[str, str]


@dataclass(frozen=True)
class CgroupLimit:
    """The tightest limit found (``value`` None: none is set, or it could not be read; ``reason`` says
    which), the usage of the level that set it, and where it was read."""

    value: int | None
    in_use: int | None
    source: str
    reason: str | None
    usage_file: str | None = None  # the usage file of the level that set it, read again each sample


def parse_membership(text: str) -> Membership:
    """A ``/proc/<pid>/cgroup`` text as the v2 path and the v1 path of each controller."""
    v2_path: str | None = None
    v1_paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2_path = path
            continue
        for name in controllers.split(","):
            v1_paths[name] = path
    return Membership(v2_path, v1_paths)


def _limit_number(text: str, *, v1: bool) -> int | None:
    """A limit file's value: None for ``max`` (v2, v1 pids) or the v1 unlimited value."""
    value = text.strip()
    if value == "max":
        return None
    number = int(value)
    return None if v1 and number >= V1_UNLIMITED else number


def _read_file(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _levels(mount: Path, cgroup_path: str) -> tuple[list[Path], bool]:
    """The existing folders from the cgroup up to ``mount`` (leaf first) and whether the leaf exists."""
    parts = [part for part in cgroup_path.strip("/").split("/") if part]
    levels = [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    existing = [level for level in levels if level.is_dir()]
    return existing, levels[0].is_dir()


def _v2_mount(sys_root: Path) -> Path:
    """The unified hierarchy: ``fs/cgroup`` on a v2 host, ``fs/cgroup/unified`` on a hybrid one."""
    base = sys_root / "fs" / "cgroup"
    if not (base / "cgroup.controllers").exists() and (base / "unified" / "cgroup.controllers").exists():
        return base / "unified"
    return base


def _v1_mount(sys_root: Path, controller: str) -> Path:
    return sys_root / "fs" / "cgroup" / controller


def _tightest(levels: list[Path], limit_file: str, *, v1: bool) -> tuple[int, Path] | None:
    """The smallest limit over ``levels`` with the folder that set it; None when no level sets one."""
    best: tuple[int, Path] | None = None
    for level in levels:
        text = _read_file(level / limit_file)
        if text is None:
            continue
        try:
            number = _limit_number(text, v1=v1)
        except ValueError:
            continue
        if number is not None and (best is None or number < best[0]):
            best = (number, level)
    return best


@dataclass(frozen=True)
class _Hierarchy:
    """Where one controller's files are for the process: the version, the mount, the cgroup's path."""

    version: str
    mount: Path
    path: str
    limit_file: str
    usage_file: str


def _hierarchy(membership: Membership, controller: Controller, sys_root: Path) -> _Hierarchy | None:
    """The v1 hierarchy of ``controller`` when the process is in one, else the v2 one, else None."""
    if controller.name in membership.v1_paths:
        mount = _v1_mount(sys_root, controller.name)
        path = membership.v1_paths[controller.name]
        return _Hierarchy("v1", mount, path, controller.v1_limit, controller.v1_usage)
    if membership.v2_path is not None:
        mount = _v2_mount(sys_root)
        return _Hierarchy("v2", mount, membership.v2_path, controller.v2_limit, controller.v2_usage)
    return None


def _usage(path: Path) -> int | None:
    text = _read_file(path)
    return int(text) if text is not None and text.strip().isdigit() else None


def cgroup_limit(membership: Membership, controller: Controller, *, sys_root: Path) -> CgroupLimit:
    """The tightest ``controller`` limit over the process's cgroup and its ancestors."""
    where = _hierarchy(membership, controller, sys_root)
    if where is None:
        reason = f"the process is in no cgroup v1 {controller.name} hierarchy nor a cgroup v2 one"
        return CgroupLimit(None, None, f"cgroup {controller.name}", reason)
    levels, leaf_found = _levels(where.mount, where.path)
    note = "" if leaf_found else f"; {where.path} is not under {where.mount}, its existing ancestors read"
    found = _tightest(levels, where.limit_file, v1=where.version == "v1")
    if found is None:
        leaf = where.mount / where.path.lstrip("/")
        reason = f"no cgroup {where.version} {where.limit_file} is set from {leaf} up to {where.mount}{note}"
        return CgroupLimit(None, None, f"cgroup {where.version} {where.limit_file}", reason)
    value, level = found
    source = f"cgroup {where.version} {where.limit_file} ({level}{note})"
    usage = level / where.usage_file
    in_use = domain_use(controller.name, usage)
    return CgroupLimit(value, in_use, source, None, str(usage) if usage.is_file() else None)


#: memory.stat keys of the file cache the kernel reclaims before an OOM kill (v1 hierarchical, v1, v2)
INACTIVE_FILE_KEYS = ("total_inactive_file", "inactive_file")


def working_set(usage_file: Path) -> int | None:
    """A memory cgroup's working set: its usage less its inactive file cache (``memory.stat`` beside the
    usage file), as the kubelet and cAdvisor count it. The page cache a run's logs and checkpoints fill
    is charged to the cgroup but reclaimed before the OOM killer acts; counting it would bring a healthy
    cgroup's headroom to nothing. None when the usage cannot be read."""
    usage = _usage(usage_file)
    if usage is None:
        return None
    stat = _read_file(usage_file.with_name("memory.stat")) or ""
    fields = dict(line.split(" ", 1) for line in stat.splitlines() if " " in line)
    inactive = next((fields[key] for key in INACTIVE_FILE_KEYS if key in fields), "0").strip()
    return max(0, usage - (int(inactive) if inactive.isdigit() else 0))


def domain_use(resource: str, usage_file: Path) -> int | None:
    """A limit's domain use now: the memory working set, or the usage file's count (tasks)."""
    return working_set(usage_file) if resource == "memory" else _usage(usage_file)
