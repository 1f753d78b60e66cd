"""WorkerPool: every chunk runs exactly once per call; failures name the chunk and keep the pool usable."""

from __future__ import annotations

import threading

import pytest

from soakbench.runtime.backends._host_pool import WorkerPool, WorkerPoolError, split_chunks


def test_split_chunks_covers_range_without_empty_chunks() -> None:
    assert split_chunks(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_chunks(2, 8) == [(0, 1), (1, 2)]
    assert split_chunks(5, 1) == [(0, 5)]


def test_run_covers_every_item_on_distinct_threads() -> None:
    pool = WorkerPool(split_chunks(9, 3))
    seen: list[int] = [0] * 9
    threads: set[int] = set()
    lock = threading.Lock()

    def fn(start: int, stop: int) -> None:
        with lock:
            threads.add(threading.get_ident())
        for i in range(start, stop):
            seen[i] += 1

    try:
        for _ in range(50):
            pool.run(fn)
        assert seen == [50] * 9
        assert len(threads) == 3
    finally:
        pool.close()
        pool.close()  # idempotent


def test_failure_names_chunk_and_pool_stays_usable() -> None:
    pool = WorkerPool(split_chunks(6, 2))

    def boom(start: int, stop: int) -> None:
        if start == 3:
            raise FloatingPointError("unstable")

    try:
        with pytest.raises(WorkerPoolError, match=r"worker 1 \(worlds 3\.\.5\).*FloatingPointError"):
            pool.run(boom)
        hits: list[int] = []
        pool.run(lambda a, b: hits.append(a))
        assert sorted(hits) == [0, 3]
    finally:
        pool.close()
    with pytest.raises(RuntimeError, match="after close"):
        pool.run(lambda a, b: None)
