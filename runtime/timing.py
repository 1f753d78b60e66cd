"""Phase timing with device synchronization, shared by the env step and the phase probe."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PHASES: tuple[str, ...] = (
    "physics_exchange",  # backend.step: ctrl in, substeps, state out
    "update_state",  # observation, reward, termination from the public state
    "reset_selection",  # choosing the rows to reset
    "backend_reset",  # backend.reset_rows for those rows
    "reset_publication",  # refreshing observations/buffers of the reset rows
)


class PhaseTimer:
    """Accumulates wall time per named phase; synchronizes ``device`` at each boundary so
    asynchronous CUDA work is charged to the phase that launched it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.samples_ms: dict[str, list[float]] = defaultdict(list)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.samples_ms[name].append((time.perf_counter() - start) * 1e3)
