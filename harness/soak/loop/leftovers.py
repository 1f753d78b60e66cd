"""What a dead soak monitor left running, proven by its ownership record, and how it is cleaned up.

Every monitor writes an ownership record at start under ``<user cache>/soakbench/soak-monitors/``: its
own identity (pid + start ticks), the host and uid, a random run token it puts in the command's
environment (``SOAKBENCH_SOAK_RUN``), every tree identity it has seen and the run's ``/dev/shm`` segments
(name + inode). It rewrites the record when the tree or its segments change and removes it on a clean
exit, so a record whose monitor is no longer alive belongs to a dead monitor.

A process is the dead run's only when ownership is proven: its pid *and* start ticks match an identity in
the record, or it carries the record's run token in its environment and started after the monitor did.
A pid reused by an unrelated process has other start ticks and no token, so it is never touched. A
segment is the run's only when its name *and* inode match the record.

Pure pieces (``proven_processes``, ``proven_segments``, ``describe``) take data; the rest is the edge.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.soak.host.procs import Identity
from soakbench.harness.soak.host.shm import ShmSnapshot
from soakbench.harness.soak.loop.exec_wrapper import WRAPPER_NAME

if TYPE_CHECKING:
    from soakbench.harness.soak.host.interface import ProcessStat
    from soakbench.harness.soak.host.sampling import ProcessSampler

RECORD_SCHEMA = 1
SHM_ROOT = Path("/dev/shm")
KILL_WAIT_S = 3.0  # how long a cleanup waits for SIGKILLed processes to disappear
_EXEC_WRAPPER = Path(__file__).resolve().with_name("exec_wrapper.py")
_REPO_ROOT = Path(__file__).resolve().parents[3]


class LeftoverError(ValueError):
    """An ownership record cannot be read; the message names the file and how to move it aside."""


def records_dir() -> Path:
    """Where monitors keep their ownership records (the user's cache dir, like foundation.mps)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "soakbench" / "soak-monitors"


def load_record(path: Path) -> dict[str, Any]:
    """One ownership record; raises LeftoverError when it is not a readable record object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
            raise ValueError(f"not a schema-{RECORD_SCHEMA} ownership record")
        int(data["monitor"]["pid"]), int(data["monitor"]["start_ticks"]), str(data["log_dir"])
        if not isinstance(data["token"], str) or not all(
            isinstance(data[key], list) for key in ("processes", "shm_segments")
        ):
            raise ValueError("token must be a string, processes and shm_segments lists")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise LeftoverError(
            f"{path}: unreadable soak monitor ownership record ({exc}); move it aside to continue"
        ) from None
    return data


def proven_processes(
    record: Mapping[str, Any], stats: Mapping[int, ProcessStat], tokens: Mapping[int, str]
) -> list[dict[str, Any]]:
    """The live processes among ``stats`` that the record proves are its run's (see module docstring).

    ``tokens`` maps a pid to the value of ``SOAKBENCH_SOAK_RUN`` in its environment, where it has one.
    """
    recorded = {(int(p["pid"]), int(p["start_ticks"])) for p in record["processes"]}
    monitor: Identity = (int(record["monitor"]["pid"]), int(record["monitor"]["start_ticks"]))
    found = []
    for pid, st in sorted(stats.items()):
        if st.state in ("Z", "X") or (pid, st.start_ticks) == monitor:
            continue
        by_identity = (pid, st.start_ticks) in recorded
        by_token = tokens.get(pid) == record["token"] and st.start_ticks >= monitor[1]
        if by_identity or by_token:
            found.append({"pid": pid, "start_ticks": st.start_ticks, "name": st.comm})
    return found


def proven_segments(record: Mapping[str, Any], snapshot: ShmSnapshot) -> list[str]:
    """The record's ``/dev/shm`` segments still present with the same inode."""
    return sorted(
        seg["name"]
        for seg in record["shm_segments"]
        if snapshot.get(seg["name"], {}).get("inode") == seg["inode"]
    )


@dataclass(frozen=True)
class Leftover:
    """What one dead monitor's record proves is still there."""

    path: Path
    record: dict[str, Any]
    processes: list[dict[str, Any]]
    segments: list[str]


def describe(leftovers: Iterable[Leftover]) -> str:
    """One line per leftover process and segment, naming the dead monitor run it belongs to."""
    lines = []
    for left in leftovers:
        mon = left.record["monitor"]
        run = (
            f"dead soak monitor pid {mon['pid']} (record {left.path.name}, log dir {left.record['log_dir']})"
        )
        for proc in left.processes:
            lines.append(f"  pid {proc['pid']} {proc['command']!r} of {run}")
        for name in left.segments:
            lines.append(f"  /dev/shm/{name} of {run}")
    return "\n".join(lines)


def _default_reader() -> ProcessSampler:
    from soakbench.harness.soak.host.sampling import make_sampler

    return make_sampler("auto")  # identities are (pid, start ticks) whichever sampler reads them


def _proven_now(record: Mapping[str, Any], reader: ProcessSampler) -> list[dict[str, Any]]:
    stats = reader.all_stats()
    tokens = {pid: t for pid in stats if (t := reader.token_of(pid)) is not None}
    procs = proven_processes(record, stats, tokens)
    for proc in procs:
        proc["command"] = " ".join(reader.cmdline(proc["pid"])) or proc["name"]
    return procs


def _ours_here(record: Mapping[str, Any]) -> bool:
    return record.get("uid") == os.getuid() and record.get("host") == socket.gethostname()


def find_leftovers(directory: Path | None = None, reader: ProcessSampler | None = None) -> list[Leftover]:
    """Leftovers of every dead monitor of this uid on this host; a record whose run left nothing is
    removed. Raises LeftoverError on an unreadable record."""
    directory = directory or records_dir()
    reader = reader or _default_reader()
    found = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        record = load_record(path)
        mon = record["monitor"]
        if not _ours_here(record) or reader.is_alive(int(mon["pid"]), int(mon["start_ticks"])):
            continue  # another host's or user's record, or a live monitor's
        left = Leftover(
            path, record, _proven_now(record, reader), proven_segments(record, reader.snapshot_shm())
        )
        if left.processes or left.segments:
            found.append(left)
        else:
            path.unlink(missing_ok=True)
    return found


def leftover_problem(directory: Path | None = None) -> str | None:
    """Why a new monitor must not start (a dead monitor's run is still there), or None."""
    try:
        leftovers = find_leftovers(directory)
    except LeftoverError as exc:
        return str(exc)
    if not leftovers:
        return None
    return (
        "a dead soak monitor left its run behind (it may hold the GPU and /dev/shm); "
        "stop it with `soak cleanup`, which touches only what the ownership record proves:\n"
        + describe(leftovers)
    )


def clean(path: Path, record: Mapping[str, Any], reader: ProcessSampler | None = None) -> Leftover:
    """SIGKILL every process the record proves is its run's (repeatedly, so a child forked meanwhile is
    caught), remove its proven segments, then the record. Returns what was found."""
    reader = reader or _default_reader()
    first = _proven_now(record, reader)
    deadline = time.monotonic() + KILL_WAIT_S
    procs = first
    while procs and time.monotonic() < deadline:
        for proc in procs:
            if reader.is_alive(proc["pid"], proc["start_ticks"]):
                _kill(proc["pid"])
        time.sleep(0.02)
        procs = _proven_now(record, reader)
    segments = proven_segments(record, reader.snapshot_shm())
    for name in segments:
        (SHM_ROOT / name).unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    return Leftover(path, dict(record), first, segments)


def _python_path() -> str:
    """The watchdog imports this package wherever the monitor was started from."""
    return os.pathsep.join(filter(None, [str(_REPO_ROOT), os.environ.get("PYTHONPATH")]))


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or not ours to signal
        os.kill(pid, signal.SIGKILL)


class OwnershipGuard:
    """The live monitor's side: writes and updates the record, runs the watchdog, removes both on exit."""

    def __init__(
        self,
        log_dir: Path,
        shm_before: ShmSnapshot,
        directory: Path | None = None,
        reader: ProcessSampler | None = None,
    ) -> None:
        reader = reader or _default_reader()
        me = reader.stat(os.getpid())
        if me is None:
            raise OSError(f"the {reader.name} sampler cannot read the monitor's own process {os.getpid()}")
        self.token = secrets.token_hex(16)
        self.shm_before = shm_before
        self.record: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "monitor": {"pid": me.pid, "start_ticks": me.start_ticks},
            "host": socket.gethostname(),
            "uid": os.getuid(),
            "token": self.token,
            "log_dir": str(log_dir),
            "started_at": time.time(),
            "processes": [],
            "shm_segments": [],
        }
        directory = directory or records_dir()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / f"{me.pid}-{me.start_ticks}.json"
        self._write()
        self.watchdog = subprocess.Popen(
            [sys.executable, "-P", "-m", "soakbench.harness.soak.loop.watchdog", str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's SIGINT to the monitor's group must not reach it
            env={**os.environ, "PYTHONPATH": _python_path()},
        )

    def wrap(self, command: Iterable[str]) -> list[str]:
        """``command`` run through the parent-death exec wrapper."""
        wrapper = [sys.executable, "-I", "-S", str(_EXEC_WRAPPER), str(os.getpid()), "--"]
        return [*wrapper, *command]

    def await_exec(self, pid: int, reader: ProcessSampler, timeout_s: float = 5.0) -> None:
        """Wait (bounded) until the wrapper at ``pid`` has become the command, so the tree's first record
        of the root names the command, not the wrapper; returns early if the wrapper exits."""
        wrapper = self.wrap(())
        deadline = time.monotonic() + timeout_s
        while self._still_wrapper(pid, reader, wrapper) and time.monotonic() < deadline:
            time.sleep(0.002)

    @staticmethod
    def _still_wrapper(pid: int, reader: ProcessSampler, wrapper: list[str]) -> bool:
        """True until the command is in place: the argv is the wrapper's, or the task still has the
        wrapper's name (exec switches the argv first, then renames the task)."""
        if reader.cmdline(pid)[: len(wrapper)] == wrapper:
            return True
        st = reader.stat(pid)
        return st is not None and st.comm == WRAPPER_NAME

    def update(self, known: Iterable[Mapping[str, Any]], shm_seen: Iterable[str]) -> None:
        """Record the tree identities and the run's segments seen so far (rewritten only on change)."""
        processes = sorted(
            ({"pid": int(p["pid"]), "start_ticks": int(p["start_ticks"])} for p in known),
            key=lambda p: (p["pid"], p["start_ticks"]),
        )
        segments = list(self.record["shm_segments"])
        listed = {s["name"] for s in segments}
        for name in sorted(set(shm_seen) - listed):
            try:
                inode = (SHM_ROOT / name).stat().st_ino
            except OSError:
                continue  # already unlinked: nothing to clean up
            if self.shm_before.get(name, {}).get("inode") != inode:
                segments.append({"name": name, "inode": inode})
        if processes != self.record["processes"] or segments != self.record["shm_segments"]:
            self.record["processes"], self.record["shm_segments"] = processes, segments
            self._write()

    def close(self) -> None:
        """Clean exit: remove the record, then end the watchdog by closing its pipe."""
        self.path.unlink(missing_ok=True)
        assert self.watchdog.stdin is not None
        self.watchdog.stdin.close()
        self.watchdog.wait()

    def _write(self) -> None:
        write_atomic(self.path, json.dumps(self.record, indent=1, sort_keys=True), mode=0o600)
