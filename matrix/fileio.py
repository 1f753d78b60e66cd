"""Atomic file writes: a temp file in the target directory, fsync, then os.replace."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_all_atomic(files: dict[Path, bytes]) -> None:
    """Write several files, each atomically; on failure restore the ones already replaced."""
    previous: dict[Path, bytes | None] = {}
    try:
        for path, data in files.items():
            previous[path] = path.read_bytes() if path.exists() else None
            write_atomic(path, data)
    except BaseException:
        for path, old in previous.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                write_atomic(path, old)
        raise
