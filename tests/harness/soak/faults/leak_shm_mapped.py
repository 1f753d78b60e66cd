"""Creates a /dev/shm segment of CHUNK MiB every tick, fills it, maps it and closes its fd (no fd held,
the pages stay: the `file_system` sharing strategy's failure mode) for DURATION s; unlinks them all and
exits 0."""

from __future__ import annotations

import mmap
import os

from _common import args, heartbeat_loop

log_dir, (duration, chunk_mib) = args((4.0, 2.0))
size = int(chunk_mib * (1 << 20))
names: list[str] = []
maps: list[mmap.mmap] = []


def tick(i: int) -> None:
    name = f"/dev/shm/soakbench-test-leak-{os.getpid()}-{i}"
    fd = os.open(name, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        view = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    view.write(b"\x01" * size)
    names.append(name)
    maps.append(view)


try:
    heartbeat_loop(log_dir, duration, 0.1, tick)
finally:
    for view in maps:
        view.close()
    for name in names:
        os.unlink(name)
