"""What the soak monitor shows while it runs: a rich live panel on a TTY, one plain line per sample off it.

``summarize`` is pure (sample + state -> display fields); the views only print.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol, TextIO

MIB = 1 << 20
LiveMode = Literal["auto", "rich", "plain", "off"]


def _fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def summarize(
    sample: Mapping[str, Any],
    *,
    phase: str,
    max_iterations: int | None,
    min_duration_s: float,
    iterations_per_s: float | None = None,
) -> dict[str, str]:
    """Display fields of one sample (strings, ready to print).

    ETA: with a known iteration budget and a positive recent iteration rate (``iterations_per_s``, from
    the last samples: prefill is much faster than training, so a whole-run average would mislead), the
    remaining iterations at that rate; otherwise the time left to the minimum duration.
    """
    totals = sample["totals"]
    progress = sample.get("progress") or {}
    iteration = progress.get("iteration")
    steps_per_s = progress.get("env_steps_per_s")
    eta: float | None = None
    if max_iterations and isinstance(iteration, int) and iterations_per_s and iterations_per_s > 0:
        eta = max(0, max_iterations - iteration) / iterations_per_s
    elif min_duration_s > sample["t"]:
        eta = min_duration_s - sample["t"]
    gpu = totals.get("gpu_memory_bytes")
    return {
        "t": f"{sample['t']:.0f}s",
        "phase": phase,
        "iteration": "-"
        if iteration is None
        else f"{iteration}" + (f"/{max_iterations}" if max_iterations else ""),
        "steps_per_s": "-" if steps_per_s is None else f"{float(steps_per_s):.0f}",
        "processes": str(totals["process_count"]),
        "rss_mib": _na(totals["rss_bytes"], MIB),
        "gpu_mib": _na(gpu, MIB),
        "eventfd": _na(totals["eventfd"]),  # null: the sampler cannot observe it (harness.soak.host.sampling)
        "shm_fd": _na(totals["shared_memory_fd"]),
        "fds": _na(totals["fd_total"]),
        "eta": _fmt_eta(eta),
    }


def _na(value: float | None, scale: float = 1.0) -> str:
    return "n/a" if value is None else f"{value / scale:.0f}"


class LiveView(Protocol):
    """Receives every sample; ``close`` ends the display."""

    def update(self, fields: Mapping[str, str]) -> None: ...

    def note(self, message: str) -> None: ...

    def close(self) -> None: ...


class PlainView:
    """One line per sample (for logs and CI), or with ``every_s`` one line at most every ``every_s``
    seconds (``--quiet-progress``); notes are always printed."""

    def __init__(
        self,
        stream: TextIO | None = None,
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._clock = clock
        self._last: float | None = None

    def update(self, fields: Mapping[str, str]) -> None:
        now = self._clock()
        if self.every_s is not None and self._last is not None and now - self._last < self.every_s:
            return
        self._last = now
        line = " ".join(f"{k}={v}" for k, v in fields.items())
        print(f"[soak] {line}", file=self.stream, flush=True)

    def note(self, message: str) -> None:
        print(f"[soak] {message}", file=self.stream, flush=True)

    def close(self) -> None:
        return None


class SilentView:
    """No output (``--live off``)."""

    def update(self, fields: Mapping[str, str]) -> None:
        return None

    def note(self, message: str) -> None:
        return None

    def close(self) -> None:
        return None


class RichView:
    """A rich Live table refreshed per sample."""

    _LABELS: ClassVar[dict[str, str]] = {
        "t": "elapsed",
        "phase": "phase",
        "iteration": "iteration",
        "steps_per_s": "env steps/s",
        "processes": "processes",
        "rss_mib": "RSS MiB",
        "gpu_mib": "GPU MiB",
        "eventfd": "eventfds",
        "shm_fd": "shm FDs",
        "fds": "FDs total",
        "eta": "ETA",
    }

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = Console(stderr=True)
        self._live = Live(console=self._console, refresh_per_second=2, transient=False)
        self._live.start()

    def update(self, fields: Mapping[str, str]) -> None:
        self._live.update(panel_table(fields, self._LABELS))

    def note(self, message: str) -> None:
        self._console.print(f"[soak] {message}")

    def close(self) -> None:
        self._live.stop()


def panel_table(fields: Mapping[str, str], labels: Mapping[str, str], pairs: int = 3) -> Any:
    """The live panel as label/value pairs, ``pairs`` to a row: eleven fields in four rows that read at
    80 columns (one column per field would cut every label)."""
    from rich.table import Table

    table = Table(title="soak monitor", show_header=False, box=None, padding=(0, 1))
    for _ in range(pairs):
        table.add_column(style="dim", no_wrap=True)
        table.add_column(justify="right", no_wrap=True, min_width=10)
    cells = [(labels.get(k, k), v) for k, v in fields.items()]
    for start in range(0, len(cells), pairs):
        row = [text for pair in cells[start : start + pairs] for text in pair]
        table.add_row(*row, *[""] * (2 * pairs - len(row)))
    return table


def make_view(mode: LiveMode, progress_every_s: float | None = None) -> LiveView:
    """``auto``: rich on a TTY (stderr), plain lines otherwise; ``progress_every_s`` thins the plain
    lines to one per that many seconds."""
    if mode == "off":
        return SilentView()
    if mode == "rich" or (mode == "auto" and sys.stderr.isatty()):
        return RichView()
    return PlainView(every_s=progress_every_s)
