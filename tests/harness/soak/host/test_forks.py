"""harness.soak.host.forks: the connector's messages parsed (pure), the lineage kept from them, and a
real watch of a process tree whose grandchild dies by SIGKILL before any sample could see it."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time

import pytest

from soakbench.harness.soak.host import forks
from soakbench.harness.soak.host.forks import ForkWatch, Lineage, parse_events


def _message(what: int, data: tuple[int, int, int, int], stamp_ns: int = 5_000_000_000) -> bytes:
    body = struct.pack("=IIQ", what, 0, stamp_ns) + struct.pack("=IIII", *data)
    cn = struct.pack("=IIIIHH", forks.CN_IDX_PROC, forks.CN_VAL_PROC, 0, 0, len(body), 0) + body
    return struct.pack("=IHHII", 16 + len(cn), forks.NLMSG_DONE, 0, 0, 0) + cn


def test_process_forks_and_exits_are_parsed_and_threads_are_skipped() -> None:
    data = (
        _message(forks.PROC_EVENT_FORK, (10, 10, 11, 11))  # a process
        + _message(forks.PROC_EVENT_FORK, (10, 10, 12, 10))  # a thread of 10
        + _message(forks.PROC_EVENT_EXIT, (11, 11, 9, 17))  # killed by SIGKILL
        + _message(forks.PROC_EVENT_EXIT, (12, 10, 0, 0))  # the thread ends
        + _message(0x2, (10, 10, 0, 0))  # an exec: not kept
    )
    assert parse_events(data) == [("fork", 10, 11, 5.0), ("exit", 11, 9, 5.0)]
    assert parse_events(data[:20]) == []  # a truncated datagram gives nothing, never an error


def test_the_lineage_follows_descendants_and_keeps_only_their_sigkills() -> None:
    lineage = Lineage(root=10)
    for event in [
        ("fork", 10, 11, 1.0), ("fork", 11, 12, 1.5), ("fork", 99, 13, 1.6),  # 13: not the tree's
        ("exit", 12, 9, 2.0), ("exit", 11, 256, 2.5), ("exit", 13, 9, 2.6),  # 11 exits with code 1
    ]:  # fmt: skip
        lineage.apply(*event)
    assert lineage.forks == 2
    assert lineage.killed == [{"pid": 12, "parent": 11, "forked": 1.5, "exited": 2.0}]
    assert lineage.alive == {}


def test_every_descendant_exit_is_kept_with_its_status_newest_last_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lineage = Lineage(root=10)
    for event in [("fork", 10, 11, 1.0), ("fork", 10, 12, 1.1), ("exit", 12, 9, 2.0), ("exit", 11, 256, 2.5)]:
        lineage.apply(*event)
    lineage.apply("exit", 13, 0, 2.6)  # not a descendant
    assert list(lineage.exits.items()) == [(12, (9, 2.0)), (11, (256, 2.5))]
    for event in [("fork", 10, 15, 2.6), ("fork", 10, 16, 2.7), ("exit", 15, 0, 2.8), ("exit", 16, 15, 2.9)]:
        lineage.apply(*event)
    watch = ForkWatch(lineage=lineage)  # statuses read as Popen.returncode reads them, times from t0
    assert watch.exits(t0=1.0) == {12: (-9, 1.0), 11: (1, 1.5), 15: (0, 1.8), 16: (-15, 1.9)}
    monkeypatch.setattr(forks, "MAX_EXITS", 2)
    lineage.apply("fork", 10, 14, 3.0)
    lineage.apply("exit", 14, 0, 3.5)
    assert list(lineage.exits) == [16, 14]  # the oldest went


GRANDCHILD = """
import os, signal, subprocess, sys, time
time.sleep(0.3)
child = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
child.wait()
print(child.pid, flush=True)
"""


def test_a_grandchild_killed_at_once_is_known_with_its_parent() -> None:
    watch = ForkWatch()
    watch.open()
    if watch.reason is not None:
        pytest.skip(watch.reason)
    t0 = time.monotonic()
    root = subprocess.Popen([sys.executable, "-c", GRANDCHILD], stdout=subprocess.PIPE, text=True)
    watch.follow(root.pid)
    out, _ = root.communicate(timeout=30)
    block = watch.finish(t0)
    killed = int(out.strip())
    assert block["used"] and block["reason"] is None and block["forks"] >= 1
    (record,) = [k for k in block["sigkilled"] if k["pid"] == killed]
    assert record["parent"] == root.pid
    assert 0 <= record["forked_t"] <= record["exited_t"] <= time.monotonic() - t0
    assert all(k["pid"] != os.getpid() for k in block["sigkilled"])
    returncode, exited_t = watch.exits(t0)[killed]  # reaped by its parent, its status still known
    assert returncode == -9 and exited_t == record["exited_t"]


def test_without_the_connector_the_reason_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(forks.socket, "socket", refuse)
    watch = ForkWatch()
    watch.open()
    watch.follow(1)
    block = watch.finish(0.0)
    assert block == {
        "used": False,
        "reason": "process events connector: Operation not permitted (it needs CAP_NET_ADMIN)",
        "forks": 0,
        "lost": 0,
        "sigkilled": [],
    }


def test_a_host_without_netlink_records_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(forks.socket, "AF_NETLINK")
    watch = ForkWatch()
    watch.open()
    assert watch.reason == "process events connector: netlink exists on Linux only"
    assert watch.finish(0.0)["used"] is False
