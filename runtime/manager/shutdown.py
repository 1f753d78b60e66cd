"""Shutdown classification and one-deadline cleanup.

Every way a run can end maps to exactly one classification, with the owner (which side failed), the
phase it failed in and the exception (type and message) or null. Cleanup is a list of named steps run
once each under ONE global deadline: the collector gets a share of it to exit on its own (join), then
SIGTERM, then SIGKILL; shared memory and fds are released whatever happened before. Errors during
cleanup are recorded, never raised, so the run summary is always written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from soakbench.foundation.vocab import RunPhase as Phase
from soakbench.foundation.vocab import ShutdownClassification as Classification
from soakbench.foundation.vocab import ShutdownOwner as Owner

OWNER_OF: dict[str, Owner] = {
    "normal_completion": "manager",
    "learner_failure": "learner",
    "collector_failure": "collector",
    "backend_worker_failure": "backend_worker",
    "timeout/stale_tick": "collector",
    "external_cancellation": "external",
    "peer_failure": "peer",
    "unknown_failure": "manager",
}
STATUS_OF: dict[str, str] = {
    "normal_completion": "completed",
    "external_cancellation": "cancelled",
}


class RunFailure(Exception):
    """A classified reason to stop the run; ``cause`` is the original exception, if any."""

    def __init__(
        self,
        classification: Classification,
        message: str,
        *,
        cause: BaseException | None = None,
        exc_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.classification = classification
        self.cause = cause
        self.exc_type = exc_type or (type(cause).__name__ if cause is not None else None)


def describe_exception(exc: BaseException | None) -> dict[str, str] | None:
    """``{type, message}`` for the manifest (the message is the exception's str, bounded)."""
    if exc is None:
        return None
    return {"type": type(exc).__name__, "message": str(exc)[:2000]}


@dataclass
class ShutdownRecord:
    """The manifest's ``shutdown`` block plus the summary's status/failure fields."""

    classification: Classification = "normal_completion"
    phase: Phase = "startup"
    exception: dict[str, str] | None = None
    reason: str | None = None
    cleanup_errors: list[str] = field(default_factory=list)
    cleanup_duration_s: float = 0.0
    collector_stop: str = "not_started"

    @classmethod
    def from_failure(cls, failure: RunFailure, phase: Phase) -> ShutdownRecord:
        exc = None
        if failure.cause is not None:
            exc = describe_exception(failure.cause)
        elif failure.exc_type is not None:
            exc = {"type": failure.exc_type, "message": str(failure)[:2000]}
        return cls(failure.classification, phase, exc, str(failure))

    @property
    def owner(self) -> Owner:
        return OWNER_OF[self.classification]

    @property
    def status(self) -> str:
        return STATUS_OF.get(self.classification, "failed")

    def manifest_block(self) -> dict[str, Any]:
        return {
            "classification": self.classification,
            "owner": self.owner,
            "phase": self.phase,
            "exception": self.exception,
            "cleanup": {
                "errors": list(self.cleanup_errors),
                "duration_s": round(self.cleanup_duration_s, 6),
                "collector_stop": self.collector_stop,
            },
        }


class Deadline:
    """A single monotonic deadline shared by every cleanup step."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.total = seconds
        self.start = clock()
        self.end = self.start + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - self._clock())

    def until_fraction(self, fraction: float) -> float:
        """Seconds left until ``fraction`` of the whole budget has elapsed (>= 0)."""
        return max(0.0, self.start + self.total * fraction - self._clock())


class Stoppable(Protocol):
    """The part of ``multiprocessing.Process`` the cleanup uses."""

    def join(self, timeout: float | None = None) -> None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def is_alive(self) -> bool: ...


def stop_process(
    proc: Stoppable, deadline: Deadline, join_share: float = 0.6, term_share: float = 0.85
) -> str:
    """Join ``proc`` until ``join_share`` of the deadline, then SIGTERM until ``term_share``, then
    SIGKILL for the rest. Returns how it ended: joined | terminated | killed | lost (still alive)."""
    proc.join(deadline.until_fraction(join_share))
    if not proc.is_alive():
        return "joined"
    proc.terminate()
    proc.join(deadline.until_fraction(term_share))
    if not proc.is_alive():
        return "terminated"
    proc.kill()
    proc.join(max(deadline.remaining(), 0.5))
    return "killed" if not proc.is_alive() else "lost"


class Cleanup:
    """Named, run-once cleanup steps; errors are collected as ``"<step>: <Type>: <message>"``."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], Any]]] = []
        self._done: set[str] = set()
        self.errors: list[str] = []

    def add(self, name: str, step: Callable[[], Any]) -> None:
        if any(n == name for n, _ in self._steps):
            raise ValueError(f"cleanup step {name!r} registered twice")
        self._steps.append((name, step))

    def run(self) -> list[str]:
        """Run every step not yet run, in registration order; return the accumulated errors."""
        for name, step in self._steps:
            if name in self._done:
                continue
            self._done.add(name)
            try:
                step()
            except Exception as exc:  # recorded, never raised: the summary must still be written
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
        return self.errors


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def exit_code(record: ShutdownRecord, cancel_signum: int | None) -> int:
    """0 for a normal completion, 128+signum for a signal-driven cancellation, else 1."""
    if record.classification == "normal_completion":
        return EXIT_OK
    if record.classification == "external_cancellation" and cancel_signum is not None:
        return 128 + cancel_signum
    return EXIT_FAILED
