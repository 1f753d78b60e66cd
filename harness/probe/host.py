"""The host's contention around a probe: load average, CPU time other processes used meanwhile, and the
GPU snapshot where NVML has one. Recorded in every probe artifact (``contention``), because on a shared
host the same code measures differently under different load and a comparison must be able to say so.
Also the acceptance mode's wait for an idle GPU (:func:`wait_for_idle`).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soakbench.foundation.nvml import NvmlReader
from soakbench.harness.probe.stats import idle_verdict

PROC_STAT = Path("/proc/stat")
# /proc/stat cpu columns that are work done on this host (idle, iowait and steal are not).
BUSY_COLUMNS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq


@dataclass(frozen=True)
class HostSample:
    """One reading of the host: monotonic time, load average, host-wide busy CPU seconds (None where
    /proc/stat is not available) and the CPU seconds this process and its waited children used."""

    monotonic_s: float
    loadavg: tuple[float, float, float] | None
    busy_cpu_s: float | None
    own_cpu_s: float


def busy_seconds(proc_stat: str, ticks_per_s: int) -> float:
    """Busy CPU seconds of all cores from ``/proc/stat`` text (its aggregate ``cpu`` line)."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            return sum(values[i] for i in BUSY_COLUMNS if i < len(values)) / ticks_per_s
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def sample_host() -> HostSample:
    """Read the host now."""
    try:
        busy: float | None = busy_seconds(PROC_STAT.read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        busy = None
    try:
        load: tuple[float, float, float] | None = os.getloadavg()
    except OSError:
        load = None
    own = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        own += usage.ru_utime + usage.ru_stime
    return HostSample(time.monotonic(), load, busy, own)


def contention_block(
    start: HostSample, end: HostSample, cpus: int | None, gpu: Mapping[str, Any]
) -> dict[str, Any]:
    """The artifact's ``contention``: both load averages, the run's wall time, host-wide busy CPU
    seconds, this probe's own (launcher and workers) and the rest, which other processes used, as
    seconds and as a share of the host's CPU capacity over the run; ``gpu`` is the NVML snapshot."""
    wall = end.monotonic_s - start.monotonic_s
    own = end.own_cpu_s - start.own_cpu_s
    if start.busy_cpu_s is None or end.busy_cpu_s is None:
        busy = other = share = None
        reason: str | None = "/proc/stat is not available on this host"
    else:
        busy = end.busy_cpu_s - start.busy_cpu_s
        other = max(0.0, busy - own)  # tick rounding can make a quiet host's rest slightly negative
        share = other / (wall * cpus) if cpus and wall > 0 else None
        reason = None
    return {
        "loadavg_start": list(start.loadavg) if start.loadavg else None,
        "loadavg_end": list(end.loadavg) if end.loadavg else None,
        "cpus": cpus,
        "wall_s": wall,
        "host_busy_cpu_s": busy,
        "probe_cpu_s": own,
        "other_cpu_s": other,
        "other_cpu_share": share,
        "cpu_reason": reason,
        "gpu": dict(gpu),
    }


def wait_for_idle(reader: NvmlReader, threshold_bytes: int, wait_s: float) -> dict[str, Any]:
    """Poll NVML until every device is idle or ``wait_s`` passes (memory release after a process exit
    lags by up to a second or two). Returns the last verdict plus ``waited_s`` and ``time``."""
    start = time.monotonic()
    while True:
        verdict = idle_verdict(reader.snapshot(), threshold_bytes)
        waited = time.monotonic() - start
        if verdict["idle"] or waited >= wait_s:
            return {**verdict, "waited_s": waited, "time": time.time()}
        time.sleep(0.5)
