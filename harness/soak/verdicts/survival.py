"""Will the production run survive? Each resource projected to its limit, judged against a target (pure).

For every series of harness.soak.verdicts.exhaustion_series (a class of the tree or of one process, with
the room its limit left), harness.soak.verdicts.projection cuts the warm-up and bounds the growth rate
from above and below at one-sided 95 %. Then, with ``headroom`` the room left and ``target`` the run
length the user must survive (``--must-survive``):

- ``hours_to_exhaustion_lower = headroom / rate_upper`` (none when the upper bound does not grow);
- the lethal rate is ``headroom / target``;
- ``survives``: ``rate_upper <= lethal`` (the lower bound on the time to exhaustion is at least the
  target);
- ``fails``: ``rate_lower > lethal`` (even the lowest rate the data allow exhausts the limit before the
  target), or no headroom is left at all;
- ``inconclusive``: neither; ``decide_after_seconds`` estimates the soak length that would decide.

Where this verdict judged a class against its limit, it rules: the floor-based ``leak_verdicts`` row
reports that class's trend and fails only on classes no limit covers (``RULES_LEAK_CLASSES``).

Without a target each class is ``projected`` (its time to exhaustion is still given). A class whose
limit could not be read is ``not_observable``, one with too few samples ``insufficient_data``. The
run's verdict is ``fails`` if any class fails, else ``inconclusive`` if any is inconclusive or none
could be judged, else ``survives``; ``no_target`` without a target.

Where the trainer records progress, the time bound is also given in its own units: the iterations and
env steps it makes per hour over the window, times the hours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from soakbench.harness.soak.verdicts.exhaustion_series import (
    ExhaustionSeries,
    exhaustion_series,
    known_limits,
)
from soakbench.harness.soak.verdicts.projection import (
    CONFIDENCE,
    RATE_METHOD,
    RateBound,
    WarmupCut,
    decide_after_s,
    rate_bound,
    warmup_cut,
)
from soakbench.harness.soak.verdicts.trends import level_text
from soakbench.harness.soak.verdicts.walk import (
    NO_SPREAD,
    PathSpread,
    exhaustion_hours,
    fresh_levels,
    path_spread,
)

ClassVerdict = Literal[
    "survives", "fails", "inconclusive", "projected", "not_observable", "insufficient_data"
]
RunVerdict = Literal["survives", "fails", "inconclusive", "no_target"]
#: survival class -> the floor-based leak classes it rules once it is judged against a target: an fd
#: of any kind counts against its process's RLIMIT_NOFILE
RULES_LEAK_CLASSES: dict[str, frozenset[str]] = {
    "pss": frozenset({"pss"}),
    "process_count": frozenset({"process_count"}),
    "threads": frozenset({"threads"}),
    "gpu_memory": frozenset({"gpu_memory"}),
    "fds": frozenset({"fd_total", "eventfd", "shared_memory_fd"}),
}
#: the class verdicts that judged a class against its limit and a target
DECIDING: frozenset[str] = frozenset({"survives", "fails", "inconclusive"})
#: a class is ``survives`` only from at least this many fresh reads of its level after the warm-up: a
#: slope and the spread around it need three points, and a level carried between reads (PSS of a large
#: process, a disk walk) repeats what it was, which Sen's slopes would read as flat
MIN_READS_TO_SURVIVE = 3
#: progress fields whose rate turns hours into the trainer's own units
PROGRESS_UNITS: dict[str, str] = {"iteration": "iterations", "total_env_steps": "env_steps"}


@dataclass(frozen=True)
class ClassSurvival:
    """One class's projection (units: the class's, per hour; times in hours or seconds as named)."""

    resource_class: str
    scope: str
    role: str | None
    unit: str
    limit: float | None
    limit_source: str
    level: float
    headroom: float | None
    bound: RateBound | None
    spread: PathSpread | None  # the future path's own randomness (harness.soak.verdicts.walk)
    cut: WarmupCut | None
    hours_to_exhaustion_lower: float | None
    units_to_exhaustion_lower: Mapping[str, float]
    verdict: ClassVerdict
    decide_after_seconds: float | None
    attribution: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        bound = self.bound
        return {
            "class": self.resource_class,
            "scope": self.scope,
            "role": self.role,
            "unit": self.unit,
            "limit": self.limit,
            "limit_source": self.limit_source,
            "level": self.level,
            "headroom": self.headroom,
            "rate_per_hour": None if bound is None else bound.rate_per_hour,
            "rate_lower_per_hour": None if bound is None else bound.lower_per_hour,
            "rate_upper_per_hour": None if bound is None else bound.upper_per_hour,
            "variance_inflation": None if bound is None else bound.variance_inflation,
            "count_floor_per_hour": None if bound is None else bound.count_floor_per_hour,
            "analysed_seconds": None if bound is None else bound.span_s,
            "path_spread": None
            if self.spread is None
            else {
                "at_lag": self.spread.at_lag,
                "lag_hours": self.spread.lag_hours,
                "exponent": self.spread.exponent,
            },
            "warmup": None if self.cut is None else {"method": self.cut.method, "t_cut": self.cut.t_cut},
            "hours_to_exhaustion_lower": self.hours_to_exhaustion_lower,
            "units_to_exhaustion_lower": dict(self.units_to_exhaustion_lower),
            "verdict": self.verdict,
            "decide_after_seconds": self.decide_after_seconds,
            "attribution": list(self.attribution),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Survival:
    """The run's survival verdict and each projected class (``to_json`` is the artifact's ``survival``)."""

    target_seconds: float | None
    verdict: RunVerdict
    classes: tuple[ClassSurvival, ...]
    warmup_seconds: float | None = None
    window: Mapping[str, float] = field(default_factory=dict)
    confidence: float = CONFIDENCE  # each rate bound's one-sided confidence
    looks: Mapping[str, Any] | None = None  # harness.soak.verdicts.looks.LookRecord.to_json(); None: one look

    @property
    def decided(self) -> bool:
        """Whether the verdict is one a soak may stop on: every class with a limit survives, or one fails."""
        return self.verdict in ("survives", "fails")

    @property
    def ruled_leak_classes(self) -> frozenset[str]:
        """The floor-based leak classes this verdict judged against their limits (none without a
        target): the ``leak_verdicts`` row reports them and fails on the others only."""
        ruled: set[str] = set()
        for entry in self.classes:
            if entry.verdict in DECIDING:
                ruled |= RULES_LEAK_CLASSES.get(entry.resource_class, frozenset())
        return frozenset(ruled)

    def to_json(self) -> dict[str, Any]:
        return {
            "target_seconds": self.target_seconds,
            "verdict": self.verdict,
            "method": RATE_METHOD,
            "warmup_seconds": self.warmup_seconds,
            "window": dict(self.window),
            "confidence": self.confidence,
            **({} if self.looks is None else {"looks": dict(self.looks)}),
            "horizon_hours": horizon_hours(self),
            "classes": [c.to_json() for c in self.classes],
        }


def _units_per_hour(samples: Sequence[Mapping[str, Any]], t_start: float, t_end: float) -> dict[str, float]:
    """The trainer's progress per hour over the window, per unit it records (``PROGRESS_UNITS``)."""
    points = [
        (float(s["t"]), s["progress"])
        for s in samples
        if t_start <= float(s["t"]) <= t_end and isinstance(s.get("progress"), Mapping)
    ]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return {}
    hours = (points[-1][0] - points[0][0]) / 3600.0
    rates = {}
    for key, unit in PROGRESS_UNITS.items():
        first, last = points[0][1].get(key), points[-1][1].get(key)
        if isinstance(first, int | float) and isinstance(last, int | float) and last > first:
            rates[unit] = (float(last) - float(first)) / hours
    return rates


def _verdict(
    bound: RateBound, *, headroom: float, spread: PathSpread, target_h: float | None
) -> tuple[ClassVerdict, float | None, str]:
    """The class verdict, the soak length that would decide (inconclusive only) and the reason."""
    hours = exhaustion_hours(bound.upper_per_hour, spread, headroom)
    said = "never at the upper bound" if hours is None else f"not before {duration_text(hours)}"
    if target_h is None:
        return "projected", None, f"exhaustion {said}"
    if headroom <= 0:
        return "fails", None, "no headroom is left: the limit is reached"
    if hours is None or hours >= target_h:
        return "survives", None, f"exhaustion {said}, at least the target {duration_text(target_h)}"
    optimistic = bound.lower_per_hour * target_h - spread.at(target_h)
    if optimistic > headroom:
        at = exhaustion_hours(bound.lower_per_hour, NO_SPREAD, headroom) or target_h
        return "fails", None, f"exhausted within {duration_text(at)} even at the lowest rate the data allow"
    lethal = headroom / target_h
    after = decide_after_s(bound, lethal_per_hour=lethal)
    return "inconclusive", after, f"the bounds straddle the target (lethal rate {lethal:.4g}/h)"


def _span_for_reads(span_s: float, reads: int) -> float:
    """The analysed span that would hold ``MIN_READS_TO_SURVIVE`` reads at the pace seen over
    ``span_s`` (with fewer than two reads, that pace is at most one read per ``span_s``)."""
    per_read_s = span_s / (reads - 1) if reads >= 2 else span_s
    return per_read_s * (MIN_READS_TO_SURVIVE - 1)


def project_series(
    series: ExhaustionSeries,
    *,
    target_h: float | None,
    declared_cut_t: float | None,
    units_per_hour: Mapping[str, float],
    confidence: float = CONFIDENCE,
) -> ClassSurvival:
    """One series' projection and verdict, every bound one-sided at ``confidence``."""
    cut = warmup_cut(series.t, series.x, declared_t=declared_cut_t) if series.t.size else None
    keep = series.t >= (cut.t_cut if cut is not None else -math.inf)
    counts = series.unit == "count"
    read = series.read[keep] if series.read is not None else None
    fresh = fresh_levels(series.t[keep], series.x[keep], read=read)
    bound = rate_bound(series.t[keep], series.x[keep], counts=counts, confidence=confidence, fresh=fresh)
    room = series.room
    hours, spread = None, None
    verdict: ClassVerdict
    after = None
    if room.headroom is None:
        verdict, reason = "not_observable", room.source
    elif bound is None:
        verdict, reason = "insufficient_data", "too few samples after the warm-up for a rate bound"
    else:
        spread = path_spread(fresh, rate_per_hour=bound.rate_per_hour, confidence=confidence)
        hours = exhaustion_hours(bound.upper_per_hour, spread, max(0.0, room.headroom))
        verdict, after, reason = _verdict(bound, headroom=room.headroom, spread=spread, target_h=target_h)
        reads = int(read.sum()) if read is not None else int(keep.sum())
        if verdict == "survives" and reads < MIN_READS_TO_SURVIVE:
            verdict, after = "inconclusive", _span_for_reads(bound.span_s, reads)
            reason = (
                f"only {reads} fresh read(s) of the level after the warm-up (a survives needs "
                f"{MIN_READS_TO_SURVIVE}); {reason}"
            )
    units = {unit: hours * rate for unit, rate in units_per_hour.items()} if hours is not None else {}
    return ClassSurvival(
        resource_class=series.resource_class,
        scope=series.scope,
        role=series.role,
        unit=series.unit,
        limit=room.limit,
        limit_source=room.source,
        level=series.level,
        headroom=room.headroom,
        bound=bound,
        spread=spread,
        cut=cut,
        hours_to_exhaustion_lower=hours,
        units_to_exhaustion_lower=units,
        verdict=verdict,
        decide_after_seconds=None if after is None else after + (series.t[0] if series.t.size else 0.0),
        attribution=series.attribution,
        reason=reason,
    )


def _run_verdict(classes: Sequence[ClassSurvival], target_s: float | None) -> RunVerdict:
    if target_s is None:
        return "no_target"
    verdicts = {c.verdict for c in classes}
    if "fails" in verdicts:
        return "fails"
    if "inconclusive" in verdicts or "survives" not in verdicts:
        return "inconclusive"
    return "survives"


def _kept(classes: Sequence[ClassSurvival]) -> tuple[ClassSurvival, ...]:
    """Tree classes all; of each per-process class the process nearest exhaustion and every one that
    does not survive (a 100-process tree would otherwise list 200 rows that say the same)."""
    kept = [c for c in classes if c.scope == "tree" or c.verdict in ("fails", "inconclusive")]
    for name in sorted({c.resource_class for c in classes if c.scope != "tree"}):
        mine = [c for c in classes if c.resource_class == name and c.scope != "tree"]
        nearest = min(
            mine,
            key=lambda c: math.inf if c.hours_to_exhaustion_lower is None else c.hours_to_exhaustion_lower,
        )
        if nearest not in kept:
            kept.append(nearest)
    return tuple(kept)


def assess_survival(
    samples: Sequence[Mapping[str, Any]],
    *,
    limits: Mapping[str, Any] | None,
    window: tuple[float, float] | None,
    target_s: float | None,
    warmup_s: float | None,
    confidence: float = CONFIDENCE,
) -> Survival:
    """The survival verdict of one soak, or of one look at it (harness.soak.verdicts.looks).

    Args:
        samples: monitor samples in time order.
        limits: the artifact's ``limits`` section (harness.soak.host.limits.HostLimits.to_json), or None.
        window: ``(t_start, t_end)``: the post-start-up samples before the finalize phase and teardown
            (harness.soak.verdicts.trends.analysis_span), or None when none remain.
        target_s: ``--must-survive`` in seconds, or None.
        warmup_s: ``--warmup-seconds`` (after ``t_start``), or None for the change-point cut.
        confidence: each rate bound's one-sided confidence.
    """
    if window is None or not samples:
        return Survival(
            target_s, "inconclusive" if target_s else "no_target", (), warmup_s, confidence=confidence
        )
    t_start, t_end = window
    declared = None if warmup_s is None else t_start + warmup_s
    units = _units_per_hour(samples, t_start, t_end)
    target_h = None if target_s is None else target_s / 3600.0
    series = exhaustion_series(samples, known_limits(limits), t_start=t_start, t_end=t_end)
    with np.errstate(invalid="ignore", divide="ignore"):
        projected = [
            project_series(
                s, target_h=target_h, declared_cut_t=declared, units_per_hour=units, confidence=confidence
            )
            for s in series
        ]
    classes = _kept(projected)
    return Survival(
        target_s,
        _run_verdict(classes, target_s),
        classes,
        warmup_s,
        {"t_start": t_start, "t_end": t_end},
        confidence=confidence,
    )


def _amount(value: float | None, unit: str) -> str:
    return "?" if value is None else level_text(value, unit)


def duration_text(hours: float) -> str:
    """A time to exhaustion a person reads at a glance: ``40 s``, ``12 min``, ``31 h``, ``4.2 d``."""
    seconds = hours * 3600.0
    for scale, suffix in ((86400.0 * 2, "d"), (3600.0 * 2, "h"), (60.0 * 2, "min")):
        if seconds >= scale:
            return f"{seconds / (scale / 2):.3g} {suffix}"
    return f"{seconds:.3g} s"


def class_sentence(entry: ClassSurvival) -> str:
    """One class's verdict for a person: what, where, against which limit, and when it runs out."""
    where = "the tree" if entry.scope == "tree" else f"pid {entry.scope} ({entry.role or 'unknown role'})"
    text = f"{entry.resource_class} of {where}: {entry.verdict}"
    if entry.limit is not None:
        text += (
            f", {_amount(entry.level, entry.unit)} of {_amount(entry.limit, entry.unit)} "
            f"({entry.limit_source}), {_amount(entry.headroom, entry.unit)} left"
        )
    if entry.bound is not None:
        text += f", growth at most {_amount(entry.bound.upper_per_hour, entry.unit)}/h"
    if entry.hours_to_exhaustion_lower is not None:
        text += f", exhausted no sooner than {duration_text(entry.hours_to_exhaustion_lower)}"
    if entry.attribution:
        text += f"; grew: {', '.join(entry.attribution[:3])}"
    return text + f" ({entry.reason})"


def survival_value(survival: Survival) -> dict[str, Any]:
    """The pass table's ``survival`` value: the verdict, the target and each class that decides it."""
    deciding = [c for c in survival.classes if c.verdict in ("fails", "inconclusive")]
    shown = deciding or [c for c in survival.classes if c.hours_to_exhaustion_lower is not None]
    return {
        "verdict": survival.verdict,
        "target_hours": None if survival.target_seconds is None else survival.target_seconds / 3600.0,
        "classes": [class_sentence(c) for c in shown],
    }


def horizon_hours(survival: Survival) -> float | None:
    """The shortest lower bound on the time to exhaustion over every class (None: no class runs out at
    its upper bound, or none was projected): the horizon this soak vouches for on this host."""
    hours = [c.hours_to_exhaustion_lower for c in survival.classes if c.hours_to_exhaustion_lower is not None]
    return min(hours) if hours else None
