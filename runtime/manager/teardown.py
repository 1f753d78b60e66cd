"""The end of every session, whatever happened: stop the collector and release every segment and fd
under one deadline, recording each failing step in the shutdown record instead of raising."""

from __future__ import annotations

import functools
import time
from typing import Protocol

from soakbench.runtime.manager.heartbeat import Heartbeat
from soakbench.runtime.manager.hooks import TrainerHooks
from soakbench.runtime.manager.resources import Doorbells, StartupState
from soakbench.runtime.manager.shutdown import Cleanup, Deadline, ShutdownRecord


class Closeable(Protocol):
    def close(self) -> None: ...


class EndingSession(Protocol):
    """The part of a training session its teardown uses."""

    hooks: TrainerHooks
    parts: StartupState
    bells: Doorbells
    heartbeat: Heartbeat
    collector_exitcode: int | None

    def snapshot_shared(self) -> None: ...

    def write_final_progress(self) -> None: ...


def teardown(session: EndingSession, record: ShutdownRecord) -> None:
    """Heartbeat off, collector stopped, counters snapshotted, the final progress line written, then
    every part closed; fills ``record``'s cleanup errors, duration and collector stop."""
    deadline = Deadline(session.hooks.shutdown_deadline_s)
    cleanup = Cleanup()
    cleanup.add("stop_heartbeat", session.heartbeat.stop)
    cleanup.add("stop_collector", functools.partial(_stop_collector, session, record, deadline))
    cleanup.add("snapshot_counters", session.snapshot_shared)
    cleanup.add("final_progress", session.write_final_progress)
    for name, part in _closeables(session.parts, session.bells):
        if part is not None:
            cleanup.add(f"close_{name}", part.close)
    link = session.parts.link
    if link is not None:
        cleanup.add("close_process", link.close_process)
    record.cleanup_errors = cleanup.run() + session.heartbeat.errors
    record.cleanup_duration_s = time.monotonic() - deadline.start


def _stop_collector(session: EndingSession, record: ShutdownRecord, deadline: Deadline) -> None:
    """Ask the collector to stop (through the ingress once attached, else an abort on the pipe), then
    join / SIGTERM / SIGKILL it within the deadline."""
    arenas, link = session.parts.arenas, session.parts.link
    if arenas is not None:
        if record.classification != "normal_completion":
            arenas.ingress.request_stop()
        arenas.ingress.mark_closed()
    elif link is not None:
        link.send_abort()  # still in start-up: do not wait for an attach
    session.bells.to_collector.set()
    if link is None:
        record.collector_stop = "not_started"
        return
    record.collector_stop = link.stop(deadline)
    session.collector_exitcode = link.proc.exitcode
    if record.collector_stop == "lost":
        raise RuntimeError(f"collector pid {link.pid} survived SIGKILL")


def _closeables(parts: StartupState, bells: Doorbells) -> list[tuple[str, Closeable | None]]:
    arenas, link = parts.arenas, parts.link
    return [
        ("ingress", arenas.ingress if arenas is not None else None),
        ("ring", arenas.ring if arenas is not None else None),
        ("control", arenas.control if arenas is not None else None),
        ("conn", link.conn if link is not None else None),
        ("to_learner", bells.to_learner),
        ("to_collector", bells.to_collector),
        ("writer", parts.writer),
        ("progress", parts.progress),
    ]
