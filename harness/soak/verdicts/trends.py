"""Leak verdicts: is a resource still growing after start-up, or only at a (possibly high) plateau?

Pure logic over the monitor's samples (``samples.jsonl`` records, see docs/soak-reference.md, "What one
sample holds"); numpy only, never torch. For each resource class the series comes from the samples'
``totals``:

=====================  ==========================  ======
class                  totals field                unit
=====================  ==========================  ======
``process_count``      ``process_count``           count
``rss``                ``rss_bytes``               bytes
``pss``                ``pss_bytes``               bytes
``threads``            ``threads``                 count
``gpu_memory``         ``gpu_memory_bytes``        bytes
``eventfd``            ``eventfd``                 count
``shared_memory_fd``   ``shared_memory_fd``        count
``fd_total``           ``fd_total``                count
=====================  ==========================  ======

The memory verdict that can fail a soak is ``pss``: summed RSS counts a page shared by two processes
twice (the replay ingress maps one segment into the trainer and the collector), summed PSS counts it
once. ``rss`` keeps its trend as a reported series (``judged: false``); its verdict is shown, never
failed on (``JUDGED_CLASSES`` lists the classes that can fail the ``leak_verdicts`` row).

Window: post-start-up samples are those with ``t >= startup_end_t``. They end before the first sample whose
progress record says the trainer is finishing (``phase: finalize`` or ``final: true``), and the last 5 %
of them (at least 3) are dropped as teardown: a stopping tree closes fds and loses processes before any
progress record says so, and that drop would hide a leak. The verdict looks only at the *later two thirds*
of what remains in time (``t >= startup_end_t + (t_end - startup_end_t) / 3``), so warm-up that outlives
the start-up signal (a replay buffer being filled, caches, allocator pools) does not count. Null
values (GPU memory without NVML) are dropped; fewer than ``min_samples`` values in the window, or an
all-null series, gives ``insufficient_data``. Windows with more than ``max_points`` values are reduced to
``max_points`` consecutive-block medians (time = block median) so the O(n²) statistics stay cheap.

A class is ``growing`` only if all of these hold, otherwise ``bounded``:

1. **Trend** — one-sided (upward) Mann–Kendall test with tie correction and continuity correction, normal
   approximation, ``p < alpha`` (0.01).
2. **Size** — the Theil–Sen slope times the window span (growth over the window) is at least the class's
   absolute floor (1 process, 64 MiB RSS/PSS/GPU, 3 fds, 3 threads) *and* ``min_relative_growth`` (5 %) of the window's
   median level.
3. **Persistence** — the window is cut into four equal-count quarters Q1..Q4. Still rising at the end
   means: median(Q4) exceeds median(Q3) by more than zero and by at least ``persistence_fraction`` (25 %)
   of the growth expected over one quarter at the Theil–Sen pace, *and* both envelopes rose:
   ``max(Q4) > max(Q3)`` and ``min(Q4) > min(Q3)``. A fill-then-plateau or a one-off step has stopped
   rising by the end, so it is bounded; a leak keeps climbing into the last quarter.

Why three tests: Mann–Kendall alone flags any monotone drift, including a few bytes of allocator noise
and autocorrelated wander (its independence assumption does not hold for resource series); the size floor
keeps only growth a person would call a leak; Theil–Sen's median slope ignores a single step (fewer than
half of the pairs straddle it); persistence rejects fill-then-plateau. The envelope part makes a sawtooth
or any other exactly periodic series safe by construction: when the period is at most a quarter of the
window, Q3 and Q4 each hold a full period, so their minima and maxima are equal and the verdict cannot be
``growing`` (a median comparison alone is fooled by the partial periods at the quarter edges). The price:
a leak hidden under noise or an oscillation is only called ``growing`` once a quarter of the window's
growth exceeds that oscillation, i.e. a longer soak detects slower leaks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Verdict = Literal["bounded", "growing", "insufficient_data"]
VERDICTS: tuple[str, ...] = ("bounded", "growing", "insufficient_data")

MIB = 1 << 20
METHOD = "mann-kendall+theil-sen"

#: resource class -> (samples ``totals`` field, unit)
RESOURCE_CLASSES: dict[str, tuple[str, str]] = {
    "process_count": ("process_count", "count"),
    "rss": ("rss_bytes", "bytes"),
    "pss": ("pss_bytes", "bytes"),
    "threads": ("threads", "count"),
    "gpu_memory": ("gpu_memory_bytes", "bytes"),
    "eventfd": ("eventfd", "count"),
    "shared_memory_fd": ("shared_memory_fd", "count"),
    "fd_total": ("fd_total", "count"),
}
#: the classes whose ``growing`` fails the soak; ``rss`` is reported beside ``pss`` (module docstring)
REPORTED_ONLY: frozenset[str] = frozenset({"rss"})
JUDGED_CLASSES: tuple[str, ...] = tuple(c for c in RESOURCE_CLASSES if c not in REPORTED_ONLY)


def _default_min_growth() -> dict[str, float]:
    return {
        "process_count": 1.0,
        "rss": 64.0 * MIB,
        "pss": 64.0 * MIB,
        "threads": 3.0,
        "gpu_memory": 64.0 * MIB,
        "eventfd": 3.0,
        "shared_memory_fd": 3.0,
        "fd_total": 3.0,
    }


@dataclass(frozen=True)
class TrendConfig:
    """Thresholds of the leak verdict (documented in the module docstring and recorded in the artifact)."""

    window_fraction: float = 2.0 / 3.0  # later part of the post-start-up span that is analysed
    min_samples: int = 8
    max_points: int = 1500
    alpha: float = 0.01
    min_relative_growth: float = 0.05
    persistence_fraction: float = 0.25
    tail_fraction: float = 0.05  # share of post-start-up samples dropped at the end as teardown
    tail_min_samples: int = 3
    min_absolute_growth: Mapping[str, float] = field(default_factory=_default_min_growth)


DEFAULT_CONFIG = TrendConfig()


def mann_kendall(values: npt.ArrayLike) -> dict[str, float]:
    """Mann–Kendall trend statistic for a series in time order.

    Args:
        values: [n] observations, n >= 2.

    Returns:
        ``{s, var_s, z, p_value_increasing, tau}``: S statistic, its variance with the tie correction
        ``(n(n-1)(2n+5) - Σ t(t-1)(2t+5)) / 18``, continuity-corrected z, one-sided p-value for an upward
        trend (normal approximation) and Kendall's tau-a.
    """
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n < 2:
        raise ValueError(f"mann_kendall needs at least 2 values, got {n}")
    s = 0.0
    for i in range(n - 1):
        s += float(np.sign(x[i + 1 :] - x[i]).sum())
    _, counts = np.unique(x, return_counts=True)
    ties = counts[counts > 1].astype(np.float64)
    var_s = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if var_s <= 0.0:  # every value equal
        z = 0.0
    elif s > 0:
        z = (s - 1.0) / math.sqrt(var_s)
    elif s < 0:
        z = (s + 1.0) / math.sqrt(var_s)
    else:
        z = 0.0
    p_up = 0.5 * math.erfc(z / math.sqrt(2.0))
    return {"s": s, "var_s": var_s, "z": z, "p_value_increasing": p_up, "tau": s / (n * (n - 1) / 2.0)}


def theil_sen_slope(t: npt.ArrayLike, values: npt.ArrayLike) -> float:
    """Median of the pairwise slopes (units of ``values`` per unit of ``t``); pairs with equal t skipped.

    Args:
        t: [n] sample times (seconds), non-decreasing.
        values: [n] observations.
    """
    tt = np.asarray(t, dtype=np.float64)
    x = np.asarray(values, dtype=np.float64)
    i, j = np.triu_indices(tt.size, k=1)
    dt = tt[j] - tt[i]
    keep = dt > 0
    if not keep.any():
        return 0.0
    return float(np.median((x[j][keep] - x[i][keep]) / dt[keep]))


def block_medians(t: np.ndarray, x: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    if t.size <= max_points:
        return t, x
    blocks = np.array_split(np.arange(t.size), max_points)
    return (
        np.array([np.median(t[b]) for b in blocks]),
        np.array([np.median(x[b]) for b in blocks]),
    )


def _series(samples: Sequence[Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Times [n] and values [n] of ``totals[key]`` where non-null, plus the number of null values."""
    times: list[float] = []
    values: list[float] = []
    nulls = 0
    for index, sample in enumerate(samples):
        totals = sample.get("totals")
        if not isinstance(totals, Mapping):
            raise ValueError(f"samples[{index}].totals: expected an object, got {type(totals).__name__}")
        value = totals.get(key)
        if value is None:
            nulls += 1
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"samples[{index}].totals.{key}: expected a number or null, got {value!r}")
        times.append(float(sample["t"]))
        values.append(float(value))
    return np.asarray(times), np.asarray(values), nulls


def level_text(value: float, unit: str) -> str:
    """A level or growth a person reads at a glance: ``503 KiB``, ``102 MiB``, ``-1.5 MiB``, ``12``."""
    if unit != "bytes":
        return f"{value:.6g}"
    for scale, suffix in ((1 << 30, "GiB"), (MIB, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value:.3g} B"


def classify_series(
    t: npt.ArrayLike,
    values: npt.ArrayLike,
    *,
    min_absolute_growth: float,
    config: TrendConfig = DEFAULT_CONFIG,
    unit: str = "count",
) -> tuple[Verdict, dict[str, Any]]:
    """Verdict for one already-windowed series (the three tests of the module docstring).

    Args:
        t: [n] sample times in seconds, non-decreasing.
        values: [n] resource level (bytes or count), no nulls.
        min_absolute_growth: the class's absolute growth floor over the window, in the series' unit.
        unit: ``bytes`` or ``count``; only how the reason sentence spells levels.

    Returns:
        (verdict, details): details holds the statistics, thresholds and a ``reason`` sentence.
    """
    tt, x = block_medians(np.asarray(t, float), np.asarray(values, float), config.max_points)
    n = int(x.size)
    details: dict[str, Any] = {"points": n}
    if n < config.min_samples:
        details["reason"] = f"{n} values in the window, fewer than the {config.min_samples} needed"
        return "insufficient_data", details
    span = float(tt[-1] - tt[0])
    slope = theil_sen_slope(tt, x)
    intercept = float(np.median(x - slope * tt))  # Theil–Sen line: level(t) = intercept + slope * t
    growth = slope * span
    median_level = float(np.median(x))
    required = max(min_absolute_growth, config.min_relative_growth * abs(median_level))
    mk = mann_kendall(x)
    quarters = np.array_split(x, 4)
    q3, q4 = float(np.median(quarters[2])), float(np.median(quarters[3]))
    envelope = {
        "q3_min": float(quarters[2].min()),
        "q3_max": float(quarters[2].max()),
        "q4_min": float(quarters[3].min()),
        "q4_max": float(quarters[3].max()),
    }
    required_rise = config.persistence_fraction * growth / 4.0
    details.update(
        {
            "slope_per_s": slope,
            "slope_per_hour": slope * 3600.0,
            "intercept": intercept,
            "growth_over_window": growth,
            "median_level": median_level,
            "mann_kendall": {k: mk[k] for k in ("s", "z", "p_value_increasing", "tau")},
            "required_growth": required,
            "persistence": {"q3_median": q3, "q4_median": q4, "required_rise": required_rise, **envelope},
        }
    )
    trend = mk["p_value_increasing"] < config.alpha
    large = growth >= required and growth > 0.0
    envelope_rose = envelope["q4_max"] > envelope["q3_max"] and envelope["q4_min"] > envelope["q3_min"]
    persistent = (q4 - q3) > 0.0 and (q4 - q3) >= required_rise and envelope_rose
    if not trend:
        reason = (
            f"no significant upward trend (Mann–Kendall p={mk['p_value_increasing']:.3g} >= {config.alpha})"
        )
    elif not large:
        reason = f"growth over the window {level_text(growth, unit)} is below the required {level_text(required, unit)}"
    elif not persistent:
        reason = (
            f"growth stopped: the last quarter (median {level_text(q4, unit)}, range "
            f"{level_text(envelope['q4_min'], unit)}..{level_text(envelope['q4_max'], unit)}) does not rise "
            f"above the third (median {level_text(q3, unit)}, range {level_text(envelope['q3_min'], unit)}.."
            f"{level_text(envelope['q3_max'], unit)}) by {level_text(required_rise, unit)} in median and in "
            "both envelopes (plateau, one-off step or oscillation)"
        )
    else:
        reason = (
            f"sustained growth: {level_text(growth, unit)} over {span:.1f} s (Theil–Sen), Mann–Kendall "
            f"p={mk['p_value_increasing']:.3g}, still rising in the last quarter"
        )
    details["reason"] = reason
    return ("growing" if trend and large and persistent else "bounded"), details


def analysis_span(
    samples: Sequence[Mapping[str, Any]], startup_end_t: float, config: TrendConfig = DEFAULT_CONFIG
) -> dict[str, Any] | None:
    """The trend window shared by every class, or None when no post-start-up sample remains.

    Post-start-up samples (``t >= startup_end_t``) are cut before the first one whose ``progress`` says
    the trainer is finishing (``phase == "finalize"`` or ``final`` true); then the last
    ``max(tail_min_samples, ceil(tail_fraction * n))`` samples are dropped as teardown (the tree closes
    fds and loses processes before any progress record says so). The window is the later
    ``window_fraction`` of what remains.

    Returns:
        ``{t_start, t_end, finalize_cut_t, tail_excluded}`` in seconds since monitor start.
    """
    post = [s for s in samples if float(s["t"]) >= startup_end_t]
    finalize_cut_t = None
    for index, sample in enumerate(post):
        progress = sample.get("progress")
        if isinstance(progress, Mapping) and (
            progress.get("phase") == "finalize" or progress.get("final") is True
        ):
            finalize_cut_t = float(sample["t"])
            post = post[:index]
            break
    tail = max(config.tail_min_samples, math.ceil(config.tail_fraction * len(post)))
    kept = post[: max(0, len(post) - tail)]
    if not kept:
        return None
    t_end = float(kept[-1]["t"])
    return {
        "t_start": startup_end_t + (1.0 - config.window_fraction) * (t_end - startup_end_t),
        "t_end": t_end,
        "finalize_cut_t": finalize_cut_t,
        "tail_excluded": min(tail, len(post)),
    }


@dataclass(frozen=True)
class LeakTrends:
    """Each resource class's leak verdict and the trend record it rests on.

    ``to_json()`` is the artifact's ``resource_summary`` pair ``{"leak_verdicts", "trends"}``; a trend record
    is ``{method, unit, verdict, reason, window {...}, slope_per_s, slope_per_hour, ..., thresholds}``.
    """

    verdicts: Mapping[str, Verdict]
    trends: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of_verdicts(cls, verdicts: Mapping[str, Verdict]) -> LeakTrends:
        """Verdicts without their trend records (a judgement made elsewhere, e.g. one per process)."""
        return cls(verdicts=dict(verdicts), trends={})

    def to_json(self) -> dict[str, Any]:
        return {"leak_verdicts": dict(self.verdicts), "trends": {k: dict(v) for k, v in self.trends.items()}}


def leak_verdicts(
    samples: Sequence[Mapping[str, Any]],
    startup_end_t: float | None,
    config: TrendConfig = DEFAULT_CONFIG,
) -> LeakTrends:
    """Leak verdict and trend record for every resource class.

    Args:
        samples: monitor samples in time order; each needs ``t`` (s since monitor start) and ``totals``;
            ``progress`` (the trainer's last progress record or null) marks the finalize phase.
        startup_end_t: the ``t`` at which start-up ended (first progress); None when it never ended, which
            makes every verdict ``insufficient_data``.
        config: thresholds.

    Returns:
        ``LeakTrends``: each class's verdict and trend record (window ``{rule, startup_end_t, t_start,
        t_end, finalize_cut_t, tail_excluded, n, nulls_dropped}``). Raises ValueError naming the sample
        index on a malformed sample.
    """
    span = None
    if startup_end_t is not None and samples:
        span = analysis_span(samples, startup_end_t, config)
    sample_t = np.asarray([float(s["t"]) for s in samples])
    verdicts: dict[str, Verdict] = {}
    trends: dict[str, dict[str, Any]] = {}
    for cls, (key, unit) in RESOURCE_CLASSES.items():
        thresholds = {
            "alpha": config.alpha,
            "min_absolute_growth": float(config.min_absolute_growth[cls]),
            "min_relative_growth": config.min_relative_growth,
            "persistence_fraction": config.persistence_fraction,
            "min_samples": config.min_samples,
            "tail_fraction": config.tail_fraction,
            "tail_min_samples": config.tail_min_samples,
        }
        trend: dict[str, Any] = {
            "method": METHOD,
            "unit": unit,
            "thresholds": thresholds,
            "judged": cls not in REPORTED_ONLY,
        }
        t_all, x_all, nulls_all = _series(samples, key)
        window: dict[str, Any] = {
            "rule": (
                f"later {config.window_fraction:.3g} of the post-start-up span, ended before the finalize "
                "phase and the teardown tail"
            ),
            "startup_end_t": startup_end_t,
            "t_start": None,
            "t_end": None,
            "finalize_cut_t": None,
            "tail_excluded": 0,
            "n": 0,
            "nulls_dropped": 0,
        }
        trend["window"] = window
        verdict: Verdict = "insufficient_data"
        if startup_end_t is None:
            trend["reason"] = "start-up never ended (no progress seen), so there are no post-start-up samples"
        elif not samples:
            trend["reason"] = "no samples were taken"
        elif t_all.size == 0:
            trend["reason"] = f"all {nulls_all} values of totals.{key} are null"
        elif span is None:
            trend["reason"] = (
                "no samples after start-up once the finalize phase and teardown tail are excluded"
            )
        else:
            t_start, t_end = span["t_start"], span["t_end"]
            in_window = (t_all >= t_start) & (t_all <= t_end)
            window.update(span)
            window["n"] = int(in_window.sum())
            window["nulls_dropped"] = int(((sample_t >= t_start) & (sample_t <= t_end)).sum()) - window["n"]
            verdict, details = classify_series(
                t_all[in_window],
                x_all[in_window],
                min_absolute_growth=float(config.min_absolute_growth[cls]),
                config=config,
                unit=unit,
            )
            trend.update(details)
        trend["verdict"] = verdict
        verdicts[cls] = verdict
        trends[cls] = trend
    return LeakTrends(verdicts=verdicts, trends=trends)
