"""Removing what a dead, recorded MPS control daemon left in its own pipe directory.

A control daemon killed without `quit` leaves its ``control`` socket (or FIFO) and ``control_lock``
behind, and `cumps start` refuses a pipe directory that is not empty of them. The stale quarantine calls
:func:`clear_dead_control` for each record it sets aside; everything here refuses rather than guesses.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from soakbench.foundation.mps import DaemonRecord, find_control_pid, ours_here, record_is_live, start_ticks


@dataclass(frozen=True)
class ControlCleanup:
    """What clearing a dead daemon's ``control*`` files did; ``skipped`` says why nothing was tried."""

    removed: tuple[Path, ...] = ()
    left: tuple[str, ...] = ()  # "<path> (<why>)" for entries kept in place
    skipped: str | None = None


def clear_dead_control(record: DaemonRecord, live: Sequence[DaemonRecord]) -> ControlCleanup:
    """Remove the ``control*`` files (socket or FIFO, ``control_lock``) a dead recorded daemon left.

    Only for a record this uid and host prove stale, only inside its own pipe directory, and never while
    a live record or a running control process serves that directory. The directory is opened without
    following a symlink and must be this uid's; entries are examined and unlinked relative to it, so no
    symlink is followed, and only sockets, FIFOs and regular files of this uid are removed."""
    pipe = Path(record.pipe_dir)
    why_not = _why_not_clear(record, pipe, live)
    if why_not is not None:
        return ControlCleanup(skipped=why_not)
    try:
        fd = os.open(pipe, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return ControlCleanup()  # nothing was left behind
    except OSError as exc:  # ELOOP for a symlink, ENOTDIR, EACCES
        return ControlCleanup(
            skipped=f"{pipe} cannot be opened as a directory without following links: {exc}"
        )
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return ControlCleanup(skipped=f"{pipe} is not owned by uid {os.getuid()}")
        return _unlink_control_entries(fd, pipe)
    finally:
        os.close(fd)


def _why_not_clear(record: DaemonRecord, pipe: Path, live: Sequence[DaemonRecord]) -> str | None:
    if not ours_here(record):
        return "the record was written by another uid or host"
    alive = record_is_live(record, uid=os.getuid(), host=socket.gethostname(), start_ticks_of=start_ticks)
    if alive is None:
        return "its control process is alive"
    if any(Path(other.pipe_dir) == pipe for other in live):
        return f"a live recorded daemon serves {pipe}"
    if find_control_pid(pipe) is not None:
        return f"a running control process serves {pipe}"
    return None


def _unlink_control_entries(dir_fd: int, pipe: Path) -> ControlCleanup:
    removed: list[Path] = []
    left: list[str] = []
    with os.scandir(dir_fd) as entries:
        names = sorted(entry.name for entry in entries if entry.name.startswith("control"))
    for name in names:
        try:
            info = os.lstat(name, dir_fd=dir_fd)
            mode = info.st_mode
            if not (stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
                left.append(f"{pipe / name} (not a socket, FIFO or regular file)")
            elif info.st_uid != os.getuid():
                left.append(f"{pipe / name} (owned by uid {info.st_uid})")
            else:
                os.unlink(name, dir_fd=dir_fd)
                removed.append(pipe / name)
        except FileNotFoundError:
            continue  # gone meanwhile
        except OSError as exc:
            left.append(f"{pipe / name} ({exc.strerror})")
    return ControlCleanup(tuple(removed), tuple(left))
