"""The watchdog that makes the monitored tree die with the soak monitor (see docs/soak-reference.md,
"When the monitor itself dies").

Started by the monitor as ``python -m harness.soak.loop.watchdog RECORD`` with a pipe on its stdin, it
blocks reading it. The read ends at EOF when the monitor exits for any reason; if the monitor's ownership
record is still there (a clean exit removes it first), the watchdog kills what the record proves is the
run's and removes the record's ``/dev/shm`` segments (``harness.soak.loop.leftovers.clean``).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from soakbench.harness.soak.loop.leftovers import clean, load_record


def main(argv: list[str] | None = None) -> int:
    """``RECORD``: block until the monitor's pipe closes, then clean what RECORD proves is ours."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.soak.loop.watchdog RECORD", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe's EOF ends the watch
    while os.read(0, 4096):
        pass
    path = Path(args[0])
    if not path.exists():
        return 0  # the monitor exited cleanly and removed its record
    clean(path, load_record(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
