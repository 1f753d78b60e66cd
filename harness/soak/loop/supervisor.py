"""The soak monitor's hold on the spawned command: reaping adopted orphans, termination (SIGTERM, then
SIGKILL, of the group and of every tracked process) and the residual check after it exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from soakbench.harness.soak.host.forensics import Forensics
from soakbench.harness.soak.host.procs import TreeTracker
from soakbench.harness.soak.loop.leftovers import OwnershipGuard

if TYPE_CHECKING:
    from soakbench.harness.soak.host.sampling import ProcessSampler


def _signal(pid: int, sig: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


class Supervisor:
    """Owns the spawned command: reaping, termination and the residual check (the process edge)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        tracker: TreeTracker,
        reader: ProcessSampler,
        guard: OwnershipGuard | None = None,
        forensics: Forensics | None = None,
    ) -> None:
        self.proc = proc
        self.tracker = tracker
        self.reader = reader
        self.guard = guard
        self.reaped: dict[tuple[int, int], int] = {}  # adopted orphan identity -> its exit status
        self.forensics = forensics  # stacks of every live process before a kill that names a trigger

    def publish(self, shm_seen: Iterable[str]) -> None:
        """Tell the ownership record (the watchdog's map of the run) every identity and segment seen."""
        if self.guard is not None:
            self.guard.update(self.tracker.known.values(), shm_seen)

    def reap_adopted(self) -> None:
        """Reap zombies re-parented to the monitor (we are their subreaper); the root is reaped by Popen.

        The loop calls this four times a second: a peek (``WNOWAIT`` leaves the child unreaped) tells
        whether any child of the monitor has exited at all, and the tree is read only when one has."""
        if not _a_child_exited():
            return
        me = os.getpid()
        for pid, ticks in list(self.tracker.known):
            if pid == self.proc.pid:
                continue
            st = self.reader.stat(pid)
            if st is not None and st.ppid == me and st.state in ("Z", "X"):
                with contextlib.suppress(ChildProcessError):
                    reaped, status = os.waitpid(pid, os.WNOHANG)
                    if reaped == pid:  # kept: an OOM kill is told from other deaths by its SIGKILL
                        self.reaped[(pid, ticks)] = os.waitstatus_to_exitcode(status)

    def refresh(self) -> None:
        """Record any tree member not seen yet (cheap stat-only scan) and publish it to the record."""
        before = len(self.tracker.known)
        self.tracker.members(self.reader.all_stats())
        if self.guard is not None and len(self.tracker.known) != before:
            self.guard.update(self.tracker.known.values(), ())

    def alive(self) -> list[dict[str, Any]]:
        """Tracked identities still alive (PID and start ticks match, not a zombie), root excluded once
        reaped."""
        found = []
        for (pid, ticks), info in sorted(self.tracker.known.items()):
            if pid == self.proc.pid and self.proc.returncode is not None:
                continue
            if self.reader.is_alive(pid, ticks):
                found.append({**info, "cmdline": self.reader.cmdline(pid)})
        return found

    def wait_quiet(self, seconds: float, *, until_all_dead: bool) -> None:
        """Wait up to ``seconds`` reaping; stop early once the root (and, if asked, every tracked
        process) is gone."""
        deadline = time.monotonic() + seconds
        while True:
            self.proc.poll()
            self.reap_adopted()
            self.refresh()
            if self.proc.returncode is not None and (not until_all_dead or not self.alive()):
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def _capture(self, trigger: str | None, alive: list[dict[str, Any]]) -> None:
        if trigger is not None and self.forensics is not None:
            self.forensics.capture(trigger, alive)

    def terminate(self, grace_s: float, trigger: str | None = None) -> list[dict[str, Any]]:
        """Capture the stacks when a ``trigger`` is named, SIGTERM the group, SIGKILL it after
        ``grace_s``, then SIGTERM->SIGKILL any other tracked process still alive. Returns the
        processes that needed SIGKILL."""
        self._capture(trigger, self.alive())
        _signal(self.proc.pid, signal.SIGTERM, group=True)
        self.wait_quiet(grace_s, until_all_dead=False)
        killed = []
        if self.proc.returncode is None:
            killed.append(dict(self.tracker.known[(self.proc.pid, self.tracker.root_start_ticks)]))
        _signal(self.proc.pid, signal.SIGKILL, group=True)
        self.wait_quiet(min(grace_s, 5.0), until_all_dead=False)
        killed.extend(self.kill_all(min(grace_s, 2.0)))
        self.proc.wait()
        return killed

    def kill_all(self, term_grace_s: float, trigger: str | None = None) -> list[dict[str, Any]]:
        """SIGTERM then SIGKILL every tracked process still alive (their stacks first when a
        ``trigger`` is named); returns those found alive."""
        survivors = self.alive()
        self._capture(trigger, survivors)
        for info in survivors:
            _signal(info["pid"], signal.SIGTERM)
        if survivors:
            self.wait_quiet(term_grace_s, until_all_dead=True)
        for info in self.alive():
            _signal(info["pid"], signal.SIGKILL)
        if survivors:
            self.wait_quiet(5.0, until_all_dead=True)
        return survivors


def _a_child_exited() -> bool:
    """True when some child of this process has exited and is not reaped yet (it stays unreaped)."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False
