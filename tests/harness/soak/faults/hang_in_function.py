"""Fault: makes progress for WORK s, starts a child that waits too, then blocks in a named function
without touching the log dir (the stacks before the kill must name ``wait_for_the_lock_forever`` and the
child's ``child_waits_on_pipe``)."""

from __future__ import annotations

import subprocess
import sys
import threading

from _common import args, heartbeat_loop

CHILD = "import sys\ndef child_waits_on_pipe():\n    sys.stdin.read()\nchild_waits_on_pipe()\n"


def wait_for_the_lock_forever() -> None:
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # never released: the process sleeps here, in the kernel's futex wait


log_dir, (work_s,) = args((1.0,))
child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE)
heartbeat_loop(log_dir, work_s, 0.05)
wait_for_the_lock_forever()
