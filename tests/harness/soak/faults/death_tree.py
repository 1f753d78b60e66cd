"""A tree for the monitor-death test: the parent writes progress and starts a child; the child starts a
grandchild in a new session (it leaves the process group); the grandchild creates and maps a /dev/shm
segment named ``soakbench_test_death_<pid>``. Everything runs until killed."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time

from _common import args, heartbeat_loop

if len(sys.argv) > 1 and sys.argv[1] == "--grandchild":
    path = f"/dev/shm/soakbench_test_death_{os.getpid()}"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 1 << 16)
    segment = mmap.mmap(fd, 1 << 16)
    while True:
        time.sleep(0.1)
if len(sys.argv) > 1 and sys.argv[1] == "--child":
    subprocess.Popen([sys.executable, __file__, "--grandchild"], start_new_session=True)
    while True:
        time.sleep(0.1)

log_dir, (duration,) = args((600.0,))
subprocess.Popen([sys.executable, __file__, "--child"])
heartbeat_loop(log_dir, duration, 0.2)
