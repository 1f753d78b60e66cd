"""The one atomic file writer: readers see the old file or the new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DEFAULT_MODE = 0o644  # artifacts and evidence are meant to be read by others; mkstemp alone makes 0600


def write_atomic(path: str | os.PathLike[str], data: bytes | str, mode: int = DEFAULT_MODE) -> Path:
    """Replace ``path`` with ``data`` (text is UTF-8 encoded) and return the path.

    The bytes go to a uniquely named temp file in the target's own directory (so ``os.replace`` stays on
    one filesystem and two writers never share a temp name), are fsynced, get ``mode``, then replace the
    target; the directory is fsynced so the rename survives a crash. On any error the temp file is
    removed and the target is untouched. The parent directory must exist.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # a directory that cannot be opened for reading cannot be fsynced; the rename still happened
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data file itself is already durable
    finally:
        os.close(fd)
