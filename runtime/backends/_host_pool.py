"""A persistent pool of host threads that run one callable over fixed, contiguous world chunks.

MuJoCo's ``mj_step``/``mj_forward`` release the GIL, so T threads each stepping their own chunk of
``MjData`` run physics on T cores. The caller's thread takes chunk 0 itself (one hand-off fewer per
control step); the pool's threads live as long as the backend, so a control step costs two barrier
crossings, not thread creation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

ChunkFn = Callable[[int, int], None]
"""Work over worlds ``[start, stop)``; must only touch those worlds."""


class WorkerPoolError(RuntimeError):
    """A chunk raised; ``chunk`` and ``start``/``stop`` name the worlds it owned."""

    def __init__(self, chunk: int, start: int, stop: int, cause: BaseException) -> None:
        super().__init__(
            f"host physics worker {chunk} (worlds {start}..{stop - 1}) failed: "
            f"{type(cause).__name__}: {cause}"
        )
        self.chunk = chunk
        self.start = start
        self.stop = stop


def split_chunks(num_items: int, num_chunks: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` ranges, sizes differing by at most one; no empty chunk."""
    num_chunks = max(1, min(num_chunks, num_items))
    base, extra = divmod(num_items, num_chunks)
    bounds, start = [], 0
    for i in range(num_chunks):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


class WorkerPool:
    """``len(chunks)`` lanes over fixed chunks: lane 0 is the caller, lanes 1.. are daemon threads.

    ``run(fn)`` calls ``fn(start, stop)`` once per chunk, concurrently, and returns when all are
    done; the first failure is re-raised as :class:`WorkerPoolError` after every lane finished,
    so the pool never desynchronizes. Not re-entrant; one caller thread at a time.
    """

    def __init__(self, chunks: list[tuple[int, int]], name: str = "soakbench-physics") -> None:
        if not chunks:
            raise ValueError("WorkerPool needs at least one chunk")
        self.chunks = list(chunks)
        self._fn: ChunkFn | None = None
        self._errors: list[tuple[int, BaseException]] = []
        self._closed = False
        lanes = len(self.chunks)
        self._start = threading.Barrier(lanes)
        self._done = threading.Barrier(lanes)
        self._threads = [
            threading.Thread(target=self._lane, args=(i,), name=f"{name}-{i}", daemon=True)
            for i in range(1, lanes)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def num_lanes(self) -> int:
        """Threads that step physics concurrently (the caller included)."""
        return len(self.chunks)

    def _call(self, lane: int) -> None:
        fn = self._fn
        assert fn is not None
        start, stop = self.chunks[lane]
        try:
            fn(start, stop)
        except BaseException as exc:  # re-raised on the caller's thread by run()
            self._errors.append((lane, exc))

    def _lane(self, lane: int) -> None:
        while True:
            try:
                self._start.wait()
            except threading.BrokenBarrierError:
                return
            if self._closed:
                return
            self._call(lane)
            try:
                self._done.wait()
            except threading.BrokenBarrierError:
                return

    def run(self, fn: ChunkFn) -> None:
        """Run ``fn`` over every chunk in parallel; raise the first chunk failure."""
        if self._closed:
            raise RuntimeError("WorkerPool.run after close()")
        self._fn = fn
        self._errors.clear()
        if self._threads:
            self._start.wait()
        self._call(0)
        if self._threads:
            self._done.wait()
        self._fn = None
        if self._errors:
            lane, exc = min(self._errors, key=lambda item: item[0])
            start, stop = self.chunks[lane]
            raise WorkerPoolError(lane, start, stop, exc) from exc

    def close(self) -> None:
        """Stop and join the lane threads; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._threads:
            self._start.abort()
            self._done.abort()
            for thread in self._threads:
                thread.join(timeout=10.0)
