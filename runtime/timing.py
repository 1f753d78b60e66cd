"""Phase timing with device synchronization, shared by the env step and the phase probe."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PHASES: tuple[str, ...] = (
    "physics_exchange",  # backend.step: ctrl in, substeps, state out
    "update_state",  # observation, reward, termination from the public state
    "reset_selection",  # choosing the rows to reset
    "backend_reset",  # backend.reset_rows for those rows
    "reset_publication",  # refreshing observations/buffers of the reset rows
)


def _no_sync() -> None:
    """Host devices run synchronously: nothing to wait for."""


def device_sync(device: torch.device) -> Callable[[], None]:
    """A call that waits for the queued work of ``device`` (CUDA); a no-op elsewhere."""
    import torch  # here, not at import: PHASES is read by torch-free code (the probe's statistics)

    return partial(torch.cuda.synchronize, device) if device.type == "cuda" else _no_sync


class PhaseTimer:
    """Accumulates wall time per named phase; synchronizes ``device`` at each boundary so
    asynchronous CUDA work is charged to the phase that launched it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.samples_ms: dict[str, list[float]] = defaultdict(list)
        self._sync = device_sync(device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.samples_ms[name].append((time.perf_counter() - start) * 1e3)

    def take(self) -> dict[str, list[float]]:
        """The samples recorded since the previous ``take`` (or construction), which are then forgotten."""
        taken = dict(self.samples_ms)
        self.samples_ms.clear()
        return taken
