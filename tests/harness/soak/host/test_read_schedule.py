"""The per-sample read schedule: memory maps only while a new /dev/shm entry is unexplained, and the
orphan reaper's peek that leaves an exited child for the reaper (or Popen) to collect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from soakbench.harness.soak.host.procs import TreeTracker
from soakbench.harness.soak.host.sampler import Sampler


def _sampler(shm_root: Path | None, before: frozenset[tuple[str, int]]) -> Sampler:
    reader = SimpleNamespace(capabilities=SimpleNamespace(shm_root=shm_root))
    tracker = TreeTracker(monitor_pid=os.getpid(), root_pid=1, root_start_ticks=0)
    return Sampler(reader, tracker, shm_root or Path("."), 0.0, shm_before=before)  # type: ignore[arg-type]


def test_maps_are_read_only_while_a_new_segment_is_unexplained(tmp_path: Path) -> None:
    (tmp_path / "before").write_bytes(b"x")
    sampler = _sampler(tmp_path, frozenset({("before", (tmp_path / "before").stat().st_ino)}))
    assert not sampler._maps_needed()  # only what was there before the spawn
    (tmp_path / "new").write_bytes(b"x")
    assert sampler._maps_needed()
    sampler.shm_seen.add("new")  # an fd or a mapping of the tree explained it
    assert not sampler._maps_needed()
    (tmp_path / "before").unlink()
    (tmp_path / "spacer").write_bytes(b"x")  # keep the old inode from being reused at once
    (tmp_path / "before").write_bytes(b"y")  # the same name, a new segment: unexplained again
    assert (tmp_path / "before").stat().st_ino not in {ino for _, ino in sampler.shm_before}
    assert sampler._maps_needed()


def test_a_sampler_without_a_shm_directory_never_reads_maps() -> None:
    assert not _sampler(None, frozenset())._maps_needed()


PEEK = """
import subprocess, sys, time
from soakbench.harness.soak.loop.supervisor import _a_child_exited
assert not _a_child_exited(), "no child yet"
child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
deadline = time.monotonic() + 10
while not _a_child_exited():
    assert time.monotonic() < deadline, "the exit was never seen"
    time.sleep(0.01)
assert _a_child_exited(), "a peek leaves the child unreaped"
assert child.wait(timeout=5) == 3, "its status is still there for its reaper"
assert not _a_child_exited(), "nothing left once reaped"
"""


def test_the_peek_sees_an_exited_child_and_leaves_it_with_its_status() -> None:
    # in a process of its own: this test process may have children of other tests
    done = subprocess.run([sys.executable, "-c", PEEK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
