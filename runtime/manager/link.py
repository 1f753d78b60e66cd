"""The trainer's end of the collector: the spawned process, its control pipe, and how a collector that
is gone is classified (its error report if it sent one, else its exit code)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from soakbench.runtime.manager.collector import CollectorArgs, collector_main
from soakbench.runtime.manager.shutdown import Deadline, RunFailure, stop_process


def failure_from_report(msg: dict[str, Any]) -> RunFailure:
    """Translate a collector ``error`` report into a classified failure."""
    owner = msg.get("owner")
    backend = owner == "backend_worker"
    where = "backend worker (env/backend)" if backend else "collector"
    return RunFailure(
        "backend_worker_failure" if backend else "collector_failure",
        f"{where} raised {msg.get('type')}: {msg.get('message')}",
        exc_type=str(msg.get("type")),
    )


def describe_exitcode(code: int | None) -> str:
    """``exit code -9 (SIGKILL)``, ``exit code 3`` or ``no exit code``."""
    if code is None:
        return "no exit code"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"exit code {code} ({signal.Signals(-code).name})"
    return f"exit code {code}"


@dataclass(frozen=True)
class CollectorLink:
    """The collector process, its pid (kept for the manifest: a closed process object forgets it) and
    the trainer's end of its duplex control pipe."""

    proc: BaseProcess
    pid: int | None
    conn: Connection

    @classmethod
    def spawn(cls, args: CollectorArgs) -> CollectorLink:
        """Start the collector with the ``spawn`` method; the child's pipe end is closed here."""
        ctx = mp.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=collector_main, args=(args, child_conn), name="soakbench-collector")
        try:
            proc.start()
        except BaseException:
            parent_conn.close()
            raise
        finally:
            child_conn.close()
        return cls(proc, proc.pid, parent_conn)

    def alive(self) -> bool:
        return self.proc.is_alive()

    def send_abort(self) -> None:
        """Tell a collector still in start-up not to wait for an attach (best effort)."""
        if self.proc.is_alive():
            with contextlib.suppress(OSError):
                self.conn.send({"kind": "abort"})

    def death_failure(self, wait_s: float) -> RunFailure:
        """Reap the collector (up to ``wait_s``) and classify why it is gone."""
        self.proc.join(wait_s)
        report = self._pending_error_report()
        if report is not None:
            return failure_from_report(report)
        return RunFailure(
            "collector_failure",
            f"collector process exited unexpectedly with {describe_exitcode(self.proc.exitcode)}",
        )

    def _pending_error_report(self) -> dict[str, Any] | None:
        try:
            while self.conn.poll(0):
                msg: dict[str, Any] = self.conn.recv()
                if msg.get("kind") == "error":
                    return msg
        except (EOFError, OSError):
            pass
        return None

    def stop(self, deadline: Deadline) -> str:
        """Join, then SIGTERM, then SIGKILL within ``deadline``: joined | terminated | killed | lost."""
        return stop_process(self.proc, deadline)

    def close_process(self) -> None:
        """Release the process sentinel fd once the collector has exited."""
        if self.proc.exitcode is not None:
            self.proc.close()
