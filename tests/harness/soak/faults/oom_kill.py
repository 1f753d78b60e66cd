"""Fault: a process the kernel OOM-kills inside a memory cgroup with a small limit.

``python oom_kill.py LOG_DIR CGROUP_DIR MODE``: the test created CGROUP_DIR and set its limit. MODE
``child``: start a child, move it into the cgroup, let it allocate until the kernel kills it, keep making
progress for a second (the monitor samples the tree after the kill), exit 0. MODE ``self``: move this
process into the cgroup and allocate until killed (the monitor's own child dies by SIGKILL). MODE
``brief``: after a second of progress, start a child that allocates at once inside the cgroup and is
killed within about half a second, between two samples; then fail on it (exit 1), as a trainer whose
worker died does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from _common import heartbeat_loop, progress

CHUNK = 4 << 20


def allocate_until_killed(log_dir: Path | None) -> None:
    """Hold ever more written (hence charged) memory; the cgroup limit ends this loop with SIGKILL."""
    held = []
    i = 0
    while True:
        held.append(b"\x01" * CHUNK)
        if log_dir is not None:
            progress(log_dir, i)
        i += 1
        time.sleep(0.02)


def join(cgroup: Path, pid: int) -> None:
    (cgroup / "cgroup.procs").write_text(f"{pid}\n")


def main() -> None:
    log_dir, cgroup, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    log_dir.mkdir(parents=True, exist_ok=True)
    heartbeat_loop(log_dir, 1.0, 0.05)
    if mode == "self":
        join(cgroup, os.getpid())
        heartbeat_loop(log_dir, 1.0, 0.05)  # sampled inside the cgroup before it fills
        allocate_until_killed(log_dir)
    child = subprocess.Popen([sys.executable, __file__, f"--{mode}-child"], stdin=subprocess.PIPE)
    join(cgroup, child.pid)
    assert child.stdin is not None
    child.stdin.close()  # the child starts allocating once it is inside the cgroup
    i = 0
    while child.poll() is None:
        progress(log_dir, i)
        i += 1
        time.sleep(0.05)
    print(f"child {child.pid} exited with {child.returncode}", flush=True)
    if mode == "brief":
        sys.exit(1)
    heartbeat_loop(log_dir, 1.0, 0.05)


if __name__ == "__main__":
    if sys.argv[1:] in (["--child-child"], ["--brief-child"]):
        sys.stdin.read()
        if sys.argv[1] == "--child-child":
            time.sleep(1.0)  # sampled inside the cgroup before it fills
        allocate_until_killed(None)
    main()
