"""Process roles: the marker the runtime sets on its own processes and the soak monitor reads back.

The marker is the process title the kernel keeps in ``/proc/<pid>/comm`` (``prctl(PR_SET_NAME)``), set to
``sbk:<role>``. The monitor already reads that field with every ``stat`` it samples, so knowing a role
costs no extra read. The kernel resets the title on ``exec``, so a compiler or shell the collector runs
is not mistaken for the collector; a child forked without ``exec`` keeps it, which is right for a forked
worker of that process.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Literal, get_args

Role = Literal["trainer", "collector", "worker", "other"]
ROLES: tuple[Role, ...] = get_args(Role)
ROLE_TITLE_PREFIX = "sbk:"
_PR_SET_NAME = 15
_TITLE_MAX = 15  # the kernel keeps 16 bytes of comm, the last one NUL


def role_title(role: Role) -> str:
    """The process title that marks ``role`` (e.g. ``sbk:collector``)."""
    if role not in ROLES:
        raise ValueError(f"role: must be one of {list(ROLES)}, got {role!r}")
    return ROLE_TITLE_PREFIX + role


def role_from_title(comm: str) -> Role | None:
    """The role a process title marks, or None when it carries no (known) marker."""
    if not comm.startswith(ROLE_TITLE_PREFIX):
        return None
    name = comm[len(ROLE_TITLE_PREFIX) :]
    for role in ROLES:
        if role == name:
            return role
    return None


def mark_process(role: Role) -> bool:
    """Set this process's title to the marker of ``role``; False where the platform has no PR_SET_NAME.

    Only the calling thread's title changes, so call it from the main thread before starting others
    (threads started later inherit it). Raises OSError when the kernel refuses.
    """
    title = role_title(role).encode()[:_TITLE_MAX]
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NAME, ctypes.c_char_p(title), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NAME, {title!r}) failed")
    return True
