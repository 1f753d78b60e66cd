"""The run's forks and deaths as the kernel reports them: its process-events connector (netlink).

Samples see a process only if it lives through one. A child that is forked, moved into a small memory
cgroup and OOM-killed within a fraction of a second is never sampled, so its PID in the kernel log
could be anyone's. The connector reports every fork (parent and child) and every exit (with the wait
status) as it happens: a process forked by the run's root, or by any process forked from it, is a
descendant, whether or not a sample ever saw it, and a SIGKILL at its exit is known without reaping it.

The connector needs CAP_NET_ADMIN; without it ``reason`` says so and the monitor judges from its
samples alone, as before. Only the processes that died by SIGKILL go into the artifact (the OOM rule's
evidence), so a run that forks often does not grow it. The last ``MAX_EXITS`` exits of descendants are
kept in memory with their wait status and time: they order deaths that fall between two samples and give
the status of a process its own parent reaped (the first-death rule).

Message layout (linux/connector.h, linux/cn_proc.h): a netlink header (16 bytes), a ``cn_msg`` header
(20 bytes), then ``proc_event``: ``what``, ``cpu``, ``timestamp_ns`` (16 bytes) and the event's data.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
NLMSG_DONE = 3
PROC_EVENT_FORK = 0x00000001
PROC_EVENT_EXIT = 0x80000000
_NL_HEADER = struct.Struct("=IHHII")
_CN_HEADER = struct.Struct("=IIIIHH")
_EVENT_HEADER = struct.Struct("=IIQ")
_FORK = struct.Struct("=IIII")  # parent pid, parent tgid, child pid, child tgid
_EXIT = struct.Struct("=IIII")  # pid, tgid, wait status, exit signal (to the parent)
_DATA_AT = _NL_HEADER.size + _CN_HEADER.size + _EVENT_HEADER.size
MAX_EXITS = 4096


def subscription() -> bytes:
    """The netlink message that asks the connector for process events."""
    op = struct.pack("=I", PROC_CN_MCAST_LISTEN)
    cn = _CN_HEADER.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(op), 0) + op
    return _NL_HEADER.pack(_NL_HEADER.size + len(cn), NLMSG_DONE, 0, 0, 0) + cn


Event = tuple[str, int, int, float]


def parse_events(data: bytes) -> list[Event]:
    """``(kind, a, b, t)`` per process-level event in one datagram (pure): ``("fork", parent, child, t)``
    for a new process (a new thread is skipped) and ``("exit", pid, wait_status, t)`` for a process's
    end (a thread's is skipped); ``t`` is the kernel's CLOCK_MONOTONIC time of the event in seconds, the
    clock of ``time.monotonic``. Other events and truncated messages are skipped."""
    out: list[Event] = []
    offset = 0
    while offset + _DATA_AT + _FORK.size <= len(data):
        length = _NL_HEADER.unpack_from(data, offset)[0]
        what, _cpu, stamp_ns = _EVENT_HEADER.unpack_from(data, offset + _NL_HEADER.size + _CN_HEADER.size)
        t = stamp_ns / 1e9
        at = offset + _DATA_AT
        if what == PROC_EVENT_FORK:
            _ppid, parent, child_pid, child = _FORK.unpack_from(data, at)
            if child_pid == child:
                out.append(("fork", parent, child, t))
        elif what == PROC_EVENT_EXIT:
            pid, tgid, status, _sig = _EXIT.unpack_from(data, at)
            if pid == tgid:
                out.append(("exit", pid, status, t))
        if length < _NL_HEADER.size:
            break
        offset += (length + 3) & ~3
    return out


@dataclass
class Lineage:
    """Descendants of one root by fork events, and those that died by SIGKILL (pure state)."""

    root: int
    alive: dict[int, dict[str, Any]] = field(default_factory=dict)  # pid -> {parent, forked}
    killed: list[dict[str, Any]] = field(default_factory=list)
    exits: dict[int, tuple[int, float]] = field(default_factory=dict)  # pid -> (wait status, t), newest last
    forks: int = 0

    def apply(self, kind: str, a: int, b: int, now: float) -> None:
        if kind == "fork" and (a == self.root or a in self.alive):
            self.alive[b] = {"parent": a, "forked": now}
            self.forks += 1
        elif kind == "exit" and a in self.alive:
            entry = self.alive.pop(a)
            self.exits.pop(a, None)  # a reused PID's exit goes to the end
            self.exits[a] = (b, now)
            while len(self.exits) > MAX_EXITS:
                del self.exits[next(iter(self.exits))]
            if b & 0x7F == signal.SIGKILL:
                self.killed.append(
                    {"pid": a, "parent": entry["parent"], "forked": entry["forked"], "exited": now}
                )


@dataclass
class ForkWatch:
    """The connector socket, opened before the spawn (events queue in it until ``follow``) and read by a
    daemon thread. ``reason`` is None while it works, else why it does not."""

    sock: socket.socket | None = None
    reason: str | None = "not opened"
    lineage: Lineage | None = None
    lost: int = 0
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self) -> None:
        if not hasattr(socket, "AF_NETLINK"):  # not Linux (the portable sampler's hosts)
            self.reason = "process events connector: netlink exists on Linux only"
            return
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
            sock.bind((0, CN_IDX_PROC))
            sock.send(subscription())
        except OSError as exc:
            self.reason = f"process events connector: {exc.strerror or exc} (it needs CAP_NET_ADMIN)"
            return
        self.sock, self.reason = sock, None

    def follow(self, root_pid: int) -> None:
        """Start reading: descendants of ``root_pid`` from the events queued since ``open``."""
        if self.sock is None:
            return
        self.lineage = Lineage(root_pid)
        self._thread = threading.Thread(target=self._read, name="soak-forks", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.sock is not None and self.lineage is not None
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.2)
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the kernel dropped events: a lineage may be missing
                    self.lost += 1
                    continue
                self.reason = f"process events connector: {exc.strerror or exc}"
                return
            with self._lock:
                for kind, a, b, t in parse_events(data):
                    self.lineage.apply(kind, a, b, t)

    def _drain(self) -> None:
        """Apply what is still queued (the last exits, read after the thread's last poll)."""
        if self.sock is None or self.lineage is None:
            return
        self.sock.setblocking(False)
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:  # EAGAIN once empty; ENOBUFS counted by the reader already
                return
            with self._lock:
                for kind, a, b, t in parse_events(data):
                    self.lineage.apply(kind, a, b, t)

    def finish(self, t0: float) -> dict[str, Any]:
        """Stop reading (after a last drain) and return the artifact's ``fork_events`` block: the
        descendants that died by SIGKILL, with t measured from the spawn's monotonic ``t0``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._drain()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        killed: list[dict[str, Any]] = []
        forks = 0
        if self.lineage is not None:
            with self._lock:
                forks = self.lineage.forks
                killed = [
                    {
                        "pid": k["pid"],
                        "parent": k["parent"],
                        "forked_t": round(max(0.0, k["forked"] - t0), 3),
                        "exited_t": round(max(0.0, k["exited"] - t0), 3),
                    }
                    for k in self.lineage.killed
                ]
        return {"used": self.reason is None, "reason": self.reason, "forks": forks, "lost": self.lost,
                "sigkilled": killed}  # fmt: skip

    def exits(self, t0: float) -> dict[int, tuple[int, float]]:
        """The descendants' last exits as ``pid -> (returncode, t)``: ``-signal`` or the exit code, like
        ``Popen.returncode``, and t from the spawn's monotonic ``t0``. Empty without the connector."""
        if self.lineage is None:
            return {}
        with self._lock:
            found = list(self.lineage.exits.items())
        return {pid: (os.waitstatus_to_exitcode(status), round(t - t0, 3)) for pid, (status, t) in found}
