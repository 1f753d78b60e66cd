"""Pure pieces of the sampler (fd classification, stat parsing, tree discovery, identity) + a real /proc read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soakbench.harness.soak.host.procs import (
    ProcReader,
    StatFields,
    TreeTracker,
    classify_fd,
    count_fds,
    descendants,
    parse_stat,
    shm_name,
    shm_names_from_maps,
    totals_of,
)
from soakbench.harness.soak.host.shm import TreeEvidence, attribute_orphans


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("pipe:[12345]", "pipe"),
        ("socket:[999]", "socket"),
        ("anon_inode:[eventfd]", "eventfd"),
        ("anon_inode:[eventpoll]", "eventpoll"),
        ("/memfd:torch_shm (deleted)", "memfd"),
        ("/dev/shm/soakbench_12_ingress_0", "shared_memory"),
        ("/dev/shm/psm_abc (deleted)", "shared_memory"),
        ("/dev/nvidia0", "nvidia"),
        ("/dev/nvidiactl", "nvidia"),
        ("/dev/nvidia-uvm", "nvidia"),
        ("/dev/null", "other"),
        ("/home/u/run/progress.jsonl", "other"),
        ("anon_inode:[timerfd]", "other"),
        ("anon_inode:inotify", "other"),
        ("/dev/pts/3", "other"),
    ],
)
def test_classify_fd(target: str, expected: str) -> None:
    assert classify_fd(target) == expected


def test_count_fds_totals_every_class() -> None:
    counts = count_fds(["pipe:[1]", "pipe:[2]", "anon_inode:[eventfd]", "/dev/shm/x", "/etc/hosts"])
    assert counts == {
        "pipe": 2,
        "socket": 0,
        "eventfd": 1,
        "eventpoll": 0,
        "memfd": 0,
        "shared_memory": 1,
        "nvidia": 0,
        "other": 1,
        "total": 5,
    }


def test_shm_names() -> None:
    assert shm_name("/dev/shm/seg (deleted)") == "seg"
    assert shm_name("/dev/shm/dir/nested") is None
    assert shm_name("/tmp/x") is None
    maps = (
        "7f00-7f10 rw-s 00000000 00:1a 123 /dev/shm/soakbench_7_ring_0\n"
        "7f10-7f20 r--p 00000000 08:01 456 /usr/lib/libc.so.6\n"
        "7f20-7f30 rw-s 00000000 00:1a 124 /dev/shm/psm_x (deleted)\n"
        "7f30-7f40 rw-p 00000000 00:00 0 \n"
    )
    assert shm_names_from_maps(maps) == {"soakbench_7_ring_0", "psm_x"}


def test_parse_stat_handles_spaces_and_parens_in_comm() -> None:
    tail = " ".join(
        ["S", "10", "20", "20", "0", "-1", "0"] + ["0"] * 4 + ["150", "50", "0", "0", "20", "0", "7"]
    )
    line = f"4242 (evil ) (name) {tail} 0 98765 1000 321 18446744073709551615"
    st = parse_stat(line)
    assert (st.pid, st.comm, st.state, st.ppid, st.pgrp) == (4242, "evil ) (name", "S", 10, 20)
    assert (st.utime_ticks, st.stime_ticks, st.num_threads, st.start_ticks, st.rss_pages) == (
        150,
        50,
        7,
        98765,
        321,
    )
    with pytest.raises(ValueError):
        parse_stat("garbage")


def _st(pid: int, ppid: int, start: int, state: str = "S") -> StatFields:
    return StatFields(pid, f"p{pid}", state, ppid, pid, pid, 0, 0, 1, start, 1)


def test_descendants() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 20: 1, 21: 20}
    assert descendants(parents, [10]) == {10, 11, 12}
    assert descendants(parents, [99]) == set()


def test_tree_tracker_adopts_orphans_and_rejects_pid_reuse() -> None:
    monitor, root = 100, 200
    tracker = TreeTracker(monitor_pid=monitor, root_pid=root, root_start_ticks=5000)
    stats = {
        1: _st(1, 0, 1),
        monitor: _st(monitor, 1, 4000),
        root: _st(root, monitor, 5000),
        201: _st(201, root, 5001),
        300: _st(300, 1, 4500),  # unrelated host process
        150: _st(150, monitor, 4100),  # a monitor child older than the run (e.g. a helper)
    }
    assert [s.pid for s in tracker.members(stats)] == [200, 201]
    # 201 double-forks: its child 202 is re-parented to the monitor (subreaper), 201 exits.
    del stats[201]
    stats[202] = _st(202, monitor, 5002)
    assert [s.pid for s in tracker.members(stats)] == [200, 202]
    # PID 201 is reused by an unrelated host process: different start ticks, not ours.
    stats[201] = _st(201, 1, 9000)
    assert 201 not in [s.pid for s in tracker.members(stats)]
    assert (201, 9000) not in tracker.known and (201, 5001) in tracker.known
    # zombies are tracked but not sampled
    stats[202] = _st(202, monitor, 5002, state="Z")
    assert [s.pid for s in tracker.members(stats)] == [200]


def test_totals_gpu_null_unless_every_process_has_a_figure() -> None:
    fds = count_fds(["anon_inode:[eventfd]", "/dev/shm/a"])
    procs = [
        {"rss_bytes": 10, "threads": 2, "fds": fds, "gpu_memory_bytes": 5},
        {"rss_bytes": 20, "threads": 3, "fds": fds, "gpu_memory_bytes": None},
    ]
    totals = totals_of(procs, gpu_available=True)
    assert totals["gpu_memory_bytes"] is None
    assert (totals["process_count"], totals["rss_bytes"], totals["threads"]) == (2, 30, 5)
    assert (totals["eventfd"], totals["shared_memory_fd"], totals["fd_total"]) == (2, 2, 4)
    procs[1]["gpu_memory_bytes"] = 7
    assert totals_of(procs, gpu_available=True)["gpu_memory_bytes"] == 12
    assert totals_of(procs, gpu_available=False)["gpu_memory_bytes"] is None


def test_shm_attribution_rules() -> None:
    before = {
        "old": {"inode": 1, "uid": 0, "size_bytes": 1, "mtime_ns": 0},
        "replaced": {"inode": 2, "uid": 0, "size_bytes": 1, "mtime_ns": 0},
    }
    after = {
        "old": {"inode": 1, "uid": 0, "size_bytes": 1, "mtime_ns": 0},  # predates the run
        "replaced": {"inode": 3, "uid": 0, "size_bytes": 1, "mtime_ns": 0},  # same name, new inode
        "soakbench_42_ring_0": {"inode": 4, "uid": 1000, "size_bytes": 8, "mtime_ns": 0},
        "seen": {"inode": 5, "uid": 1000, "size_bytes": 8, "mtime_ns": 0},
        "foreign": {"inode": 6, "uid": 1000, "size_bytes": 8, "mtime_ns": 0},
        "soakbench_7_other_run": {"inode": 7, "uid": 1000, "size_bytes": 8, "mtime_ns": 0},
    }
    tree = TreeEvidence(seen_open=frozenset({"seen"}), tree_pids=frozenset({42}))
    host = attribute_orphans(before, after, tree, uid=0, attribution="host")
    assert {o["name"]: o["evidence"] for o in host} == {
        "replaced": ["new_same_uid"],
        "seen": ["seen_open"],
        "soakbench_42_ring_0": ["name_prefix"],
    }
    # same uid: a concurrent run's live segment (held by a foreign PID) and another trainer's prefix are
    # not ours; an unheld new segment is (it may have been created and closed between two samples)
    same_uid = {k: {**v, "uid": 1000} for k, v in after.items()}
    held = TreeEvidence(
        seen_open=frozenset({"seen"}), tree_pids=frozenset({42}), held_elsewhere={"foreign": 9}
    )
    host_same = attribute_orphans(before, same_uid, held, uid=1000, attribution="host")
    assert {o["name"]: o["evidence"] for o in host_same} == {
        "replaced": ["new_same_uid"],
        "seen": ["seen_open", "new_same_uid"],
        "soakbench_42_ring_0": ["name_prefix", "new_same_uid"],
    }
    evidence = attribute_orphans(before, after, tree, uid=0, attribution="evidence")
    assert [o["name"] for o in evidence] == ["seen", "soakbench_42_ring_0"]
    with pytest.raises(ValueError):
        attribute_orphans(before, after, tree, uid=0, attribution="bogus")  # type: ignore[arg-type]


@pytest.mark.linux_only
def test_reader_samples_a_real_child(tmp_path: Path) -> None:
    """Real /proc: a child holding an eventfd and a /dev/shm fd is sampled with both classes."""
    name = f"soaktest_{os.getpid()}_procs"
    code = (
        "import os, sys, time\n"
        f"e = os.eventfd(0); fd = os.open('/dev/shm/{name}', os.O_CREAT | os.O_RDWR, 0o600)\n"
        f"os.unlink('/dev/shm/{name}'); print('ready', flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        reader = ProcReader()
        st = reader.stat(child.pid)
        assert st is not None and st.ppid == os.getpid()
        record, shm = reader.sample_process(st, gpu_by_pid=None)
        assert record["fds"]["eventfd"] == 1 and record["fds"]["shared_memory"] == 1
        assert record["rss_bytes"] > 0 and record["threads"] >= 1 and record["gpu_memory_bytes"] is None
        assert shm == {name} and record["cmdline"][0] == sys.executable
        assert reader.is_alive(child.pid, st.start_ticks)
        assert not reader.is_alive(child.pid, st.start_ticks + 1)  # same PID, other start ticks: not ours
    finally:
        child.kill()
        child.wait()
    time.sleep(0.05)
    assert not ProcReader().is_alive(child.pid, st.start_ticks)
