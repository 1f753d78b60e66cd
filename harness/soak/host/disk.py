"""Disk use of the run's folders, sampled through the run: the log dir and the folders it is told to watch
(checkpoints, replay dumps).

A long run that fills its file system dies at the write that fails, a checkpoint save or a log line,
often hours in and with nothing in its own logs to say why. The bytes under each watched folder over
time show the growth, and the file system's free space beside them says how long that growth can go on.
Bytes are allocated bytes (``st_blocks`` x 512), what the file system gives up, not apparent sizes: a
sparse file costs what it allocates. Free space is what an unprivileged writer can still use
(``f_bavail``: the blocks reserved for root are not the run's).

Walking a folder of thousands of checkpoint files costs milliseconds, more than a sample can spend every
second. So, as the PSS reads of harness.soak.host.rollup, each folder keeps a period: the last walk's
cost divided by ``budget_ms``, rounded up, at most ``max_period`` samples; between walks a sample repeats
the last figures with ``age_samples``, the samples since the walk (0: walked for this sample). The
``statvfs`` is one cheap system call and is taken every sample. A folder that does not exist yet (a
checkpoint dir made at the first save) has 0 bytes and 0 files and the figures of the file system of its
nearest existing ancestor, where it will be created.
"""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK_BYTES = 512  # the unit of st_blocks, whatever the file system's block size


@dataclass(frozen=True)
class FsSpace:
    """One ``statvfs``: ``size_bytes`` (``f_blocks``), ``free_bytes`` (``f_bavail``: what an unprivileged
    writer can use), ``used_bytes`` (``f_blocks - f_bfree``); ``measured_at`` is the existing path read."""

    measured_at: Path
    size_bytes: int
    free_bytes: int
    used_bytes: int


def nearest_existing(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists (the root always does)."""
    absolute = Path(os.path.abspath(path))
    for candidate in (absolute, *absolute.parents):
        if os.path.lexists(candidate):
            return candidate
    return absolute


def fs_space(path: Path) -> FsSpace | None:
    """The file system holding ``path`` (or, before it exists, its nearest existing ancestor); None
    when ``statvfs`` fails."""
    at = nearest_existing(path)
    try:
        vfs = os.statvfs(at)
    except OSError:
        return None
    return FsSpace(
        measured_at=at,
        size_bytes=vfs.f_blocks * vfs.f_frsize,
        free_bytes=vfs.f_bavail * vfs.f_frsize,
        used_bytes=(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize,
    )


#: first-level folders kept per watched path (the largest): enough to name where the bytes go
MAX_CHILDREN = 10


@dataclass(frozen=True)
class TreeSize:
    """Allocated bytes and the count of regular files under a path; ``children``: the bytes under each
    first-level entry (``.`` for the files at the top), the largest ``MAX_CHILDREN``."""

    allocated_bytes: int
    files: int
    children: tuple[tuple[str, int], ...] = ()


def _walk_from(top: str) -> TreeSize:
    """Sum over the regular files below folder ``top``: symbolic links are not followed, a hard-linked
    file counts once, an entry that vanishes mid-walk (atomic-rename temp files) or a subfolder that
    cannot be listed is skipped."""
    total, files = 0, 0
    linked: set[tuple[int, int]] = set()
    by_child: dict[str, int] = {}
    stack: list[tuple[str, str | None]] = [(top, None)]  # (folder, the first-level entry it lies under)
    while stack:
        folder, child = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            under = child if child is not None else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, under))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_nlink > 1:
                if (st.st_dev, st.st_ino) in linked:
                    continue
                linked.add((st.st_dev, st.st_ino))
            size = st.st_blocks * BLOCK_BYTES
            total += size
            files += 1
            key = under if child is not None else "."
            by_child[key] = by_child.get(key, 0) + size
    largest = sorted(by_child.items(), key=lambda item: -item[1])[:MAX_CHILDREN]
    return TreeSize(total, files, tuple(largest))


def tree_size(path: Path) -> TreeSize | None:
    """Allocated bytes and regular files under ``path``: (0, 0) when it does not exist, the file itself
    when it is a regular file, None when it exists but cannot be read."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return TreeSize(0, 0)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return TreeSize(st.st_blocks * BLOCK_BYTES, 1)
    if not stat.S_ISDIR(st.st_mode):
        return TreeSize(0, 0)
    try:
        os.scandir(path).close()
    except OSError:
        return None  # the top folder itself is unreadable: unknown, never 0
    return _walk_from(str(path))


@dataclass(frozen=True)
class PathUsage:
    """One watched path in one sample (``allocated_bytes``/``files`` None when it cannot be read; ``fs_*``
    None when ``statvfs`` fails)."""

    path: str
    allocated_bytes: int | None
    files: int | None
    fs_free_bytes: int | None
    fs_size_bytes: int | None
    age_samples: int
    children: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The sample's ``disk`` entry."""
        return {
            "path": self.path,
            "bytes": self.allocated_bytes,
            "files": self.files,
            "fs_free_bytes": self.fs_free_bytes,
            "fs_size_bytes": self.fs_size_bytes,
            "age_samples": self.age_samples,
            "children": dict(self.children),
        }


def watched_paths(log_dir: Path, watch_paths: Iterable[Path]) -> tuple[Path, ...]:
    """The log dir first, then each watch path in the order given, each once (compared as absolute
    paths, so ``run/ckpt`` and ``./run/ckpt`` are one)."""
    seen: set[str] = set()
    paths: list[Path] = []
    for path in (log_dir, *watch_paths):
        key = os.path.abspath(path)
        if key not in seen:
            seen.add(key)
            paths.append(path)
    return tuple(paths)


@dataclass
class _Walked:
    size: TreeSize | None
    age: int  # samples since the walk
    period: int


@dataclass
class DiskWatch:
    """The cost schedule of the walks (state across samples); ``walk`` does one walk (a test passes its
    own, with a fake ``clock``)."""

    paths: tuple[Path, ...]
    budget_ms: float = 2.0
    max_period: int = 30
    walk: Callable[[Path], TreeSize | None] = tree_size
    clock: Callable[[], float] = time.perf_counter  # seconds
    walked: dict[Path, _Walked] = field(default_factory=dict)

    def sample(self) -> list[PathUsage]:
        """Every watched path for this sample, in order."""
        return [self._usage(path) for path in self.paths]

    def _usage(self, path: Path) -> PathUsage:
        entry = self._walked(path)
        space = fs_space(path)
        return PathUsage(
            path=str(path),
            allocated_bytes=None if entry.size is None else entry.size.allocated_bytes,
            files=None if entry.size is None else entry.size.files,
            fs_free_bytes=None if space is None else space.free_bytes,
            fs_size_bytes=None if space is None else space.size_bytes,
            age_samples=entry.age,
            children=() if entry.size is None else entry.size.children,
        )

    def _walked(self, path: Path) -> _Walked:
        """The walk of ``path`` for this sample: a fresh one when due, else the last one, a sample older."""
        entry = self.walked.get(path)
        if entry is not None and entry.age + 1 < entry.period:
            entry.age += 1
            return entry
        started = self.clock()
        size = self.walk(path)
        cost_ms = (self.clock() - started) * 1000.0
        period = max(1, min(self.max_period, math.ceil(cost_ms / self.budget_ms)))
        entry = _Walked(size, 0, period)
        self.walked[path] = entry
        return entry
