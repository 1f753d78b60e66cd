"""The exec wrapper the monitor spawns its command through (see docs/soak-reference.md, "When the monitor
itself dies").

On Linux it sets ``PR_SET_PDEATHSIG`` to SIGKILL and names its task ``soak-exec``; it checks that the
monitor is still its parent (it may have died between fork and prctl), then execs the command in place, so
the command keeps the wrapper's pid and start time. It runs as
``python -I -S exec_wrapper.py MONITOR_PID -- COMMAND...`` and imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
# The wrapper's task name until it execs: exec renames the task after it has switched the command line,
# so the monitor knows the command is in place once this name is gone.
WRAPPER_NAME = "soak-exec"
EXIT_EXEC_FAILED = 127  # what a shell returns for a command it cannot run


def main(argv: list[str] | None = None) -> int:
    """``MONITOR_PID -- COMMAND...``: arm the parent-death signal, then become COMMAND."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: exec_wrapper.py MONITOR_PID -- COMMAND...", file=sys.stderr)
        return 2
    # Linux only: macOS has no parent-death signal, so there the watchdog alone stops the run when the
    # monitor dies (docs/soak-reference.md, Samplers).
    libc = ctypes.CDLL(None, use_errno=True)
    if sys.platform.startswith("linux") and libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        print(f"soak: prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}", file=sys.stderr)
        return EXIT_EXEC_FAILED
    if sys.platform.startswith("linux"):
        libc.prctl(PR_SET_NAME, WRAPPER_NAME.encode(), 0, 0, 0)  # best effort: the monitor also checks argv
    if os.getppid() != int(argv[0]):
        return EXIT_EXEC_FAILED  # the monitor died before the signal was armed: run nothing
    command = argv[2:]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"soak: cannot execute {command[0]!r}: {exc.strerror}", file=sys.stderr)
    return EXIT_EXEC_FAILED


if __name__ == "__main__":
    sys.exit(main())
