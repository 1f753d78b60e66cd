"""progress.jsonl at least every ``period_s``, even while the main thread is busy.

The main thread beats at its own milestones; a daemon thread covers long stretches without one (a long
learner update, env start-up). Both go through one lock, and any beat resets the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Calls ``write()`` on every beat, from either thread, until stopped."""

    def __init__(self, period_s: float, write: Callable[[], None]) -> None:
        self._period_s = period_s
        self._write = write
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_mono = 0.0
        self.errors: list[str] = []  # a failing background beat, reported at cleanup

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            self._last_mono = time.monotonic()
            self._write()

    def beat_if_due(self) -> None:
        if time.monotonic() - self._last_mono >= self._period_s:
            self.beat()

    def stop(self) -> None:
        """No beat after this returns; raises if the thread does not end within 5 s."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5.0)
            if self._thread.is_alive():
                raise RuntimeError("heartbeat thread did not stop within 5 s")

    def _loop(self) -> None:
        while not self._stopped.wait(min(1.0, self._period_s / 4)):
            try:
                self.beat_if_due()
            except Exception as exc:  # reported at cleanup, never kills the run
                self.errors.append(f"heartbeat: {type(exc).__name__}: {exc}")
                return
