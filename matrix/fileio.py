"""Several files replaced as one unit, each through ``foundation.atomic.write_atomic``."""

from __future__ import annotations

from pathlib import Path

from soakbench.foundation.atomic import write_atomic


def write_all_atomic(files: dict[Path, bytes]) -> None:
    """Write several files (creating their folders), each atomically; on failure restore the ones
    already replaced, so the set is all old or all new."""
    previous: dict[Path, bytes | None] = {}
    try:
        for path, data in files.items():
            previous[path] = path.read_bytes() if path.exists() else None
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
    except BaseException:
        for path, old in previous.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                write_atomic(path, old)
        raise
