"""The monitor's own cost during its loop, from the figures the watch recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soakbench.harness.soak.loop.driver import MonitorResult


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]) or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def overhead(result: MonitorResult) -> dict[str, Any]:
    """The monitor's own cost during the loop: CPU share of one core and per-sample time."""
    return {
        "loop_cpu_s": round(result.loop_cpu_s, 4),
        "loop_wall_s": round(result.loop_wall_s, 3),
        "cpu_share_of_one_core": round(result.loop_cpu_s / result.loop_wall_s, 5)
        if result.loop_wall_s
        else None,
        "sample_count": len(result.sample_ms),
        "sample_ms_p50": percentile(result.sample_ms, 50),
        "sample_ms_p95": percentile(result.sample_ms, 95),
        "sample_ms_max": max(result.sample_ms) if result.sample_ms else None,
    }
