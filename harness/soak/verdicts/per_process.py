"""Leak verdicts per process identity: the tree total can hide one process that grows.

Pure logic over the monitor's samples (each sample's ``processes`` records, see docs/soak-reference.md,
"What one sample holds"). A process is an identity ``(pid, start_ticks)``. Each identity's series go
through the same window and the same three tests as the tree (``harness.soak.verdicts.trends``): the
tree's trend window, ``classify_series`` with the class's floors, on at most ``PROCESS_MAX_POINTS`` block
medians. Per-process classes:

=====================  ==========================  ======  =====================
class                  process record field        unit    fails the soak
=====================  ==========================  ======  =====================
``pss``                ``pss_bytes``               bytes   yes
``uss``                ``uss_bytes``               bytes   no (reported)
``rss``                ``rss_bytes``               bytes   no (reported)
``threads``            ``threads``                 count   yes
``eventfd``            ``fds.eventfd``             count   yes
``shared_memory_fd``   ``fds.shared_memory``       count   yes
``fd_total``           ``fds.total``               count   yes
``gpu_memory``         ``gpu_memory_bytes``        bytes   yes
=====================  ==========================  ======  =====================

A process's ``growing`` verdict fails the soak only when the process was seen through at least
``MIN_WINDOW_COVERAGE`` (three quarters) of the trend window: a compiler subprocess that grows for its
whole short life is reported, not failed. Coverage is the part of the window between the process's first
and last sample. This is what catches a leaking child that exits shortly before its parent: its exit drops
the tree's total inside the window's last quarter, so the tree verdict reads "growth stopped", while the
child's own series rises to its last sample.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from soakbench.harness.soak.verdicts.trends import (
    DEFAULT_CONFIG,
    MIB,
    REPORTED_ONLY,
    TrendConfig,
    analysis_span,
    classify_series,
)

#: class -> (dotted field of a process record, unit, fails the soak)
PROCESS_CLASSES: dict[str, tuple[str, str, bool]] = {
    "pss": ("pss_bytes", "bytes", True),
    "uss": ("uss_bytes", "bytes", False),
    "rss": ("rss_bytes", "bytes", False),
    "threads": ("threads", "count", True),
    "eventfd": ("fds.eventfd", "count", True),
    "shared_memory_fd": ("fds.shared_memory", "count", True),
    "fd_total": ("fds.total", "count", True),
    "gpu_memory": ("gpu_memory_bytes", "bytes", True),
}
PEAK_FIELDS: tuple[str, ...] = (
    "rss_bytes",
    "pss_bytes",
    "uss_bytes",
    "swap_bytes",
    "threads",
    "fds.total",
    "gpu_memory_bytes",
)
MIN_WINDOW_COVERAGE = 0.75
MAX_LISTED = 200  # identities listed in full; the rest (short-lived, never growing) are only counted
#: block medians per process series: the statistics are O(n²) and a tree has many processes (20 of them
#: over an hour at 1 s took 16 s at the tree's 1500 points; 300, with vectorised extraction, 1.4 s)
PROCESS_MAX_POINTS = 300


@dataclass
class Track:
    """One identity's samples: times and records in time order."""

    pid: int
    start_ticks: int
    times: list[float] = field(default_factory=list)
    records: list[Mapping[str, Any]] = field(default_factory=list)


def _number(node: Any) -> float | None:
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return float(node)


def _getter(dotted: str) -> Callable[[Mapping[str, Any]], float | None]:
    """A fast reader of a dotted numeric field of a process record (None where absent or not a number)."""
    first, _, second = dotted.partition(".")
    if not second:
        return lambda record: _number(record.get(first))

    def nested(record: Mapping[str, Any]) -> float | None:
        inner = record.get(first)
        return _number(inner.get(second)) if isinstance(inner, Mapping) else None

    return nested


def tracks(samples: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Track]:
    """Every identity seen in the samples, first seen first. Raises ValueError naming a malformed record."""
    found: dict[tuple[int, int], Track] = {}
    for index, sample in enumerate(samples):
        processes = sample.get("processes") or []
        if not isinstance(processes, list):
            raise ValueError(f"samples[{index}].processes: expected a list")
        for record in processes:
            pid, start = record.get("pid"), record.get("start_ticks")
            if not isinstance(pid, int) or not isinstance(start, int):
                raise ValueError(f"samples[{index}].processes: pid and start_ticks must be integers")
            track = found.setdefault((pid, start), Track(pid, start))
            track.times.append(float(sample["t"]))
            track.records.append(record)
    return found


def coverage(track: Track, span: Mapping[str, Any] | None) -> float:
    """Share of the trend window between the identity's first and last sample (0 without a window)."""
    if span is None:
        return 0.0
    t_start, t_end = float(span["t_start"]), float(span["t_end"])
    if t_end <= t_start:
        return 0.0
    seen = min(track.times[-1], t_end) - max(track.times[0], t_start)
    return max(0.0, min(1.0, seen / (t_end - t_start)))


def rate_text(slope_per_s: float, unit: str) -> str:
    """A growth rate a person reads at a glance: ``+1 per 12 s``, ``+3.5/s``, ``+2.1 MiB/s``."""
    if unit == "bytes":
        return f"+{slope_per_s / MIB:.3g} MiB/s"
    if slope_per_s >= 1.0 or slope_per_s <= 0.0:
        return f"+{slope_per_s:.3g}/s"
    return f"+1 per {1.0 / slope_per_s:.3g} s"


def _reduce(values: np.ndarray, max_points: int) -> np.ndarray:
    """Medians of consecutive blocks of ``ceil(n / max_points)`` values (the last block may be shorter):
    the tree's block medians, vectorised, because a tree has many process series."""
    k = math.ceil(values.size / max_points)
    if k <= 1:
        return values
    padded = np.full(k * math.ceil(values.size / k), np.nan)
    padded[: values.size] = values
    reduced: np.ndarray = np.nanmedian(padded.reshape(-1, k), axis=1)
    return reduced


def _window_series(track: Track, key: str, span: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Times [n] and values [n] of ``key`` inside the window, nulls dropped."""
    lo = bisect.bisect_left(track.times, float(span["t_start"]))
    hi = bisect.bisect_right(track.times, float(span["t_end"]))
    getter = _getter(key)
    pairs = [(t, v) for t, v in zip(track.times[lo:hi], map(getter, track.records[lo:hi]), strict=True)]
    kept = [(t, v) for t, v in pairs if v is not None]
    return np.asarray([p[0] for p in kept], float), np.asarray([p[1] for p in kept], float)


def _class_trend(
    track: Track, cls: str, span: Mapping[str, Any] | None, config: TrendConfig
) -> dict[str, Any]:
    key, unit, fails = PROCESS_CLASSES[cls]
    entry: dict[str, Any] = {"unit": unit, "judged": fails, "n": 0}
    if span is None:
        entry.update(
            verdict="insufficient_data", reason="no trend window (start-up never ended or no samples)"
        )
        return entry
    t, x = _window_series(track, key, span)
    entry["n"] = int(t.size)
    floor_class = cls if cls in config.min_absolute_growth else "pss"  # uss shares the memory floor
    verdict, details = classify_series(
        _reduce(t, config.max_points),
        _reduce(x, config.max_points),
        min_absolute_growth=float(config.min_absolute_growth[floor_class]),
        config=config,
        unit=unit,
    )
    entry["verdict"] = verdict
    entry["reason"] = details["reason"]
    for name in ("slope_per_s", "growth_over_window", "median_level"):
        if name in details:
            entry[name] = details[name]
    return entry


def _peaks(track: Track) -> dict[str, int | None]:
    peaks: dict[str, int | None] = {}
    for dotted in PEAK_FIELDS:
        values = [v for v in map(_getter(dotted), track.records) if v is not None]
        peaks[dotted.replace("fds.total", "fd_total")] = int(max(values)) if values else None
    return peaks


@dataclass(frozen=True)
class ProcessVerdict:
    """One identity (pid + start ticks) of the tree, judged over the analysed window. Times in seconds on
    the samples' clock; ``window_coverage`` the share of the window it was seen in (judged at or above
    ``MIN_WINDOW_COVERAGE``); ``failing`` the growing classes that fail the soak."""

    pid: int
    start_ticks: int
    role: str
    name: str
    command: tuple[str, ...]
    first_t: float
    last_t: float
    lifetime_s: float
    samples: int
    window_coverage: float
    judged: bool
    peaks: Mapping[str, int | None]
    leak_verdicts: Mapping[str, str]
    growing: tuple[str, ...]
    failing: tuple[str, ...]
    trends: Mapping[str, Mapping[str, Any]]
    rank: int | None = None  # a torchrun rank's

    def to_json(self) -> dict[str, Any]:
        out = {
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "role": self.role,
            "name": self.name,
            "command": list(self.command),
            "first_t": self.first_t,
            "last_t": self.last_t,
            "lifetime_s": self.lifetime_s,
            "samples": self.samples,
            "window_coverage": self.window_coverage,
            "judged": self.judged,
            "peaks": dict(self.peaks),
            "leak_verdicts": dict(self.leak_verdicts),
            "growing": list(self.growing),
            "failing": list(self.failing),
            "trends": {k: dict(v) for k, v in self.trends.items()},
        }
        return out if self.rank is None else {**out, "rank": self.rank}


@dataclass(frozen=True)
class PerProcessVerdicts:
    """The tree's long-lived processes judged one by one: the coverage rule, the window, the classes that
    fail a soak, and the listed processes (failing first); ``omitted`` counts the others, none growing."""

    min_window_coverage: float
    window: Mapping[str, float] | None
    judged_classes: tuple[str, ...]
    processes: tuple[ProcessVerdict, ...]
    omitted: int

    def to_json(self) -> dict[str, Any]:
        """The artifact's ``resource_summary.per_process``."""
        return {
            "min_window_coverage": self.min_window_coverage,
            "window": None if self.window is None else dict(self.window),
            "judged_classes": list(self.judged_classes),
            "processes": [entry.to_json() for entry in self.processes],
            "omitted": self.omitted,
        }


def process_entry(track: Track, span: Mapping[str, Any] | None, config: TrendConfig) -> ProcessVerdict:
    """One identity of ``resource_summary.per_process.processes``."""
    last = track.records[-1]
    trends = {cls: _class_trend(track, cls, span, config) for cls in PROCESS_CLASSES}
    share = coverage(track, span)
    judged = share >= MIN_WINDOW_COVERAGE
    growing = tuple(c for c, e in trends.items() if e["verdict"] == "growing")
    return ProcessVerdict(
        pid=track.pid,
        start_ticks=track.start_ticks,
        role=str(last.get("role", "other")),
        name=str(last.get("name", "")),
        command=tuple(str(a) for a in (track.records[0].get("cmdline") or [])),
        first_t=track.times[0],
        last_t=track.times[-1],
        lifetime_s=round(track.times[-1] - track.times[0], 3),
        samples=len(track.times),
        window_coverage=round(share, 4),
        judged=judged,
        peaks=_peaks(track),
        leak_verdicts={c: e["verdict"] for c, e in trends.items()},
        growing=growing,
        failing=tuple(c for c in growing if judged and PROCESS_CLASSES[c][2]),
        trends=trends,
        rank=last["rank"] if isinstance(last.get("rank"), int) else None,
    )


def per_process_verdicts(
    samples: Sequence[Mapping[str, Any]],
    startup_end_t: float | None,
    config: TrendConfig = DEFAULT_CONFIG,
) -> PerProcessVerdicts:
    """The tree's processes judged one by one (``to_json()``: the artifact's ``resource_summary.per_process``).

    Identities whose verdicts fail the soak come first, then the rest by how long they were seen; at
    most ``MAX_LISTED`` are listed and ``omitted`` counts the others (none of them growing).
    """
    span = analysis_span(samples, startup_end_t, config) if startup_end_t is not None and samples else None
    per_config = replace(config, max_points=min(config.max_points, PROCESS_MAX_POINTS))
    entries = [process_entry(track, span, per_config) for track in tracks(samples).values()]
    entries.sort(key=lambda e: (not e.failing, not e.growing, -e.lifetime_s, e.first_t))
    keep = [e for e in entries if e.growing]
    rest = [e for e in entries if not e.growing]
    room = max(0, MAX_LISTED - len(keep))
    return PerProcessVerdicts(
        min_window_coverage=MIN_WINDOW_COVERAGE,
        window=None if span is None else {"t_start": span["t_start"], "t_end": span["t_end"]},
        judged_classes=tuple(c for c, (_, _, fails) in PROCESS_CLASSES.items() if fails),
        processes=tuple(keep + rest[:room]),
        omitted=max(0, len(rest) - room),
    )


def failing_processes(
    per_process: PerProcessVerdicts | None, ruled: frozenset[str] = frozenset()
) -> list[str]:
    """One phrase per judged process that grows, e.g. ``collector (pid 4242): fd_total growing +1 per
    12 s`` (several classes joined by commas), ``rank 1 collector (pid 4242): ...`` in a torchrun job;
    classes in ``ruled`` (judged against their limit by the survival verdict) are left out."""
    if per_process is None:
        return []
    phrases = []
    for entry in per_process.processes:
        grows = [
            f"{cls} growing {rate_text(float(entry.trends[cls].get('slope_per_s', 0.0)), entry.trends[cls]['unit'])}"
            for cls in entry.failing
            if cls not in ruled
        ]
        if grows:
            rank = f"rank {entry.rank} " if entry.rank is not None else ""
            phrases.append(f"{rank}{entry.role} (pid {entry.pid}): {', '.join(grows)}")
    return phrases


def leak_row(
    verdicts: Mapping[str, str], per_process: PerProcessVerdicts | None, ruled: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], bool]:
    """Value and pass/fail of the ``leak_verdicts`` row: no judged tree class and no judged process
    growing (``rss`` and short-lived processes are reported, never failed on). A class in ``ruled`` was
    judged against its limit by the survival verdict: its floor verdict is reported, not failed on."""
    growing = sorted(c for c, v in verdicts.items() if v == "growing" and c not in REPORTED_ONLY | ruled)
    processes = failing_processes(per_process, ruled)
    value: dict[str, Any] = {"growing": growing, "verdicts": dict(verdicts)}
    if per_process is not None:
        value["processes"] = processes
    if ruled:
        value["ruled_by_survival"] = sorted(ruled)
    return value, not growing and not processes


def leak_text(value: Mapping[str, Any]) -> str:
    """The failure sentence of the ``leak_verdicts`` row: the tree classes, then each growing process."""
    parts = []
    if value.get("growing"):
        parts.append(f"resource classes still growing after start-up: {', '.join(value['growing'])}")
    parts.extend(value.get("processes") or [])
    return "; ".join(parts)
