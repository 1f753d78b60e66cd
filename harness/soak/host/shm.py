"""Attribution of POSIX shared-memory segments (``/dev/shm`` entries) to a monitored run.

Rule (documented in docs/soak-reference.md, "How a ``/dev/shm`` segment is attributed to the run"). A
``/dev/shm`` entry present after shutdown (after the grace period) is an *orphaned segment of the run*
when it was **not present before the command was spawned** (same name and inode in the pre-spawn snapshot
means it predates the run) and at least one of these holds:

1. ``seen_open`` — some process of the run's tree had it open (``/proc/<pid>/fd``) or mapped
   (``/proc/<pid>/maps``) in some sample;
2. ``name_prefix`` — its name starts with ``soakbench_<pid>`` for a PID of the run's tree (the trainer's
   naming contract);
3. ``new_same_uid`` — (only with ``attribution="host"``, the default) it appeared during the run, is
   owned by the monitor's uid, is **not held** (open or mapped) by any live process outside the run's tree
   at the post-grace scan, and does not carry another process's trainer prefix (``soakbench_<pid>_`` for a
   PID outside the tree). This catches a segment created and closed without an unlink between two samples,
   which no sample could see open, while ignoring the live segments of a concurrent, unrelated run. Its
   limit: a same-user process outside the tree that created a segment during the run and already exited
   (or closed it) without unlinking is also attributed (fail closed: a false failure, never a false pass).
   ``attribution="evidence"`` drops this rule for shared hosts where that is known to happen.

Pure: ``attribute_orphans`` takes snapshots and evidence and returns the list; ``snapshot_shm`` is the
edge.

While the run goes on, ``shm_usage`` measures the segments it has open or mapped and the ``/dev/shm``
file system: it is a tmpfs with its own size (half of RAM by default, often 64 MiB in a container), so a
run whose segments grow fails with ``SIGBUS`` or ``ENOSPC`` long before the host's memory runs out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from soakbench.harness.soak.host.disk import BLOCK_BYTES, fs_space

ShmSnapshot = dict[str, dict[str, int]]  # name -> {inode, uid, size_bytes, mtime_ns}
Attribution = Literal["host", "evidence"]
TRAINER_SHM_PREFIX = "soakbench_"


def snapshot_shm(root: Path = Path("/dev/shm")) -> ShmSnapshot:
    """Every regular file directly under ``root`` -> inode, owner uid, size, mtime (ns)."""
    snap: ShmSnapshot = {}
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot list {root}: {exc.strerror}") from exc
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed while listing
        if not entry.is_file(follow_symlinks=False):
            continue
        snap[entry.name] = {
            "inode": st.st_ino,
            "uid": st.st_uid,
            "size_bytes": st.st_size,
            "mtime_ns": st.st_mtime_ns,
        }
    return snap


@dataclass(frozen=True)
class TreeEvidence:
    """What the monitor saw of the run's tree: ``seen_open``, the names any tree process had open or
    mapped in any sample; ``tree_pids``, every PID ever seen in the tree; ``held_elsewhere``, name -> PID
    of a live process outside the tree holding it at the post-grace scan."""

    seen_open: frozenset[str]
    tree_pids: frozenset[int]
    held_elsewhere: Mapping[str, int] = field(default_factory=dict)


def attribute_orphans(
    before: Mapping[str, Mapping[str, int]],
    after: Mapping[str, Mapping[str, int]],
    tree: TreeEvidence,
    uid: int,
    attribution: Attribution = "host",
) -> list[dict[str, Any]]:
    """Orphaned segments of the run, sorted by name: ``[{name, path, size_bytes, uid, evidence: [...]}]``.

    ``before``/``after``: pre-spawn and post-grace snapshots; ``tree``: what the monitor saw of the run's
    tree; ``uid``: monitor's uid.
    """
    held = tree.held_elsewhere
    if attribution not in ("host", "evidence"):
        raise ValueError(f"attribution must be 'host' or 'evidence', got {attribution!r}")
    seen = tree.seen_open
    prefixes = tuple(f"{TRAINER_SHM_PREFIX}{pid}_" for pid in tree.tree_pids)
    orphans: list[dict[str, Any]] = []
    for name in sorted(after):
        info = after[name]
        prior = before.get(name)
        if prior is not None and prior["inode"] == info["inode"]:
            continue  # predates the run
        evidence: list[str] = []
        if name in seen:
            evidence.append("seen_open")
        if prefixes and name.startswith(prefixes):
            evidence.append("name_prefix")
        foreign_prefix = name.startswith(TRAINER_SHM_PREFIX) and not evidence
        if attribution == "host" and info["uid"] == uid and name not in held and not foreign_prefix:
            evidence.append("new_same_uid")
        if evidence:
            orphans.append(
                {
                    "name": name,
                    "path": f"/dev/shm/{name}",
                    "size_bytes": info["size_bytes"],
                    "uid": info["uid"],
                    "evidence": evidence,
                }
            )
    return orphans


def held_by_processes(
    names: Iterable[str], exclude_pids: Iterable[int], proc_root: Path = Path("/proc")
) -> dict[str, int]:
    """Which of ``names`` some live process (outside ``exclude_pids``) has open or mapped now: name -> PID.

    Processes whose fds/maps cannot be read (another user, vanished) are skipped.
    """
    from soakbench.harness.soak.host.procs import shm_name, shm_names_from_maps

    wanted = set(names)
    excluded = set(exclude_pids)
    found: dict[str, int] = {}
    if not wanted:
        return found
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit() or int(entry.name) in excluded:
            continue
        pid = int(entry.name)
        seen: set[str] = set()
        try:
            for fd in os.listdir(f"{entry.path}/fd"):
                try:
                    name = shm_name(os.readlink(f"{entry.path}/fd/{fd}"))
                except OSError:
                    continue
                if name is not None:
                    seen.add(name)
            seen |= shm_names_from_maps(Path(entry.path, "maps").read_text())
        except OSError:
            continue
        for name in seen & wanted:
            found.setdefault(name, pid)
    return found


@dataclass(frozen=True)
class ShmUsage:
    """The run's ``/dev/shm`` in one sample: ``segments`` (name -> allocated bytes) are the entries the tree
    has had open or mapped that still exist, ``run_bytes`` their sum; ``fs_*`` the tmpfs as a whole. All
    None (and no segments) where the sampler has no shm root."""

    run_bytes: int | None
    segments: Mapping[str, int]
    fs_used_bytes: int | None
    fs_size_bytes: int | None

    def to_json(self) -> dict[str, Any]:
        """The sample's ``shm`` block."""
        return {
            "run_bytes": self.run_bytes,
            "segments": dict(self.segments),
            "fs_used_bytes": self.fs_used_bytes,
            "fs_size_bytes": self.fs_size_bytes,
        }


NO_SHM_USAGE = ShmUsage(run_bytes=None, segments={}, fs_used_bytes=None, fs_size_bytes=None)


def _allocated(root: Path, names: set[str]) -> dict[str, int] | None:
    """Allocated bytes of each of ``names`` still under ``root`` (one listing: the names a long run has
    seen may far outnumber the live ones); None when ``root`` cannot be listed."""
    segments: dict[str, int] = {}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return None
    for entry in entries:
        if entry.name not in names:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # unlinked since the listing
        segments[entry.name] = st.st_blocks * BLOCK_BYTES
    return dict(sorted(segments.items()))


def shm_usage(root: Path | None, names: Iterable[str]) -> ShmUsage:
    """The run's segments among ``names`` (what the tree had open or mapped) and the shm file system."""
    segments = None if root is None else _allocated(root, set(names))
    if root is None or segments is None:
        return NO_SHM_USAGE  # no shm root, or it cannot be listed: its file system is not known either
    space = fs_space(root)
    return ShmUsage(
        run_bytes=sum(segments.values()),
        segments=segments,
        fs_used_bytes=None if space is None else space.used_bytes,
        fs_size_bytes=None if space is None else space.size_bytes,
    )
