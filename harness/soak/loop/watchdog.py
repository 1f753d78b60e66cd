"""Two tiny helper processes that make the monitored tree die with the soak monitor (see docs/soak.md,
"When the monitor itself dies").

``exec`` is the exec wrapper the monitor spawns the command through: on Linux it sets
``PR_SET_PDEATHSIG`` to SIGKILL; it checks that the monitor is still its parent (it may have died
between fork and prctl), then execs the command in place, so the command keeps the wrapper's pid and
start time. It runs as ``python -I -S watchdog.py exec MONITOR_PID -- COMMAND...`` and imports only the
standard library.

``watch`` is the watchdog: started by the monitor with a pipe on its stdin, it blocks reading it. The
read ends at EOF when the monitor exits for any reason; if the monitor's ownership record is still there
(a clean exit removes it first), the watchdog kills what the record proves is the run's and removes the
record's ``/dev/shm`` segments (``harness.soak.loop.leftovers.clean``).
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


def _exec(argv: list[str]) -> int:
    """``exec MONITOR_PID -- COMMAND...``: arm the parent-death signal, then become COMMAND."""
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: watchdog.py exec MONITOR_PID -- COMMAND...", file=sys.stderr)
        return 2
    # Linux only: macOS has no parent-death signal, so there the watchdog alone stops the run when the
    # monitor dies (docs/soak.md, Samplers).
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


def _watch(argv: list[str]) -> int:
    """``watch RECORD``: block until the monitor's pipe closes, then clean what RECORD proves is ours."""
    if len(argv) != 1:
        print("usage: watchdog.py watch RECORD", file=sys.stderr)
        return 2
    from pathlib import Path

    from harness.soak.loop.leftovers import clean, load_record

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe's EOF ends the watch
    while os.read(0, 4096):
        pass
    path = Path(argv[0])
    if not path.exists():
        return 0  # the monitor exited cleanly and removed its record
    clean(path, load_record(path))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``exec ...`` or ``watch ...``."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "exec":
        return _exec(args[1:])
    if args and args[0] == "watch":
        return _watch(args[1:])
    print("usage: watchdog.py {exec|watch} ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
