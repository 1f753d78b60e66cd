"""How fast can a resource be growing, at most? Warm-up cut and a bounded growth rate for one series (pure).

A soak lasts minutes; the run it vouches for lasts days. What carries over is a growth *rate*, and only
an upper bound on it is safe to project: a point estimate that is a little low would promise a run that
dies. This module turns one resource series (seconds, level) into that bound; harness.soak.verdicts.survival
sets it against the limit. No I/O, frozen results.

The steps, each for a reason:

1. **Equal-time bins** (``MAX_BINS`` bin means). The statistics below are O(n²) and assume equally
   spaced points; samples are about 1 s apart but not exactly, and a 72 h soak has 259,200 of them.
   Bin means also shrink the sampling noise, never the trend.
2. **Warm-up cut.** A series that rises and then plateaus (a replay buffer filling to capacity, caches,
   allocator pools) is not a leak. Either the user declares the warm-up (``--warmup-seconds``), or a
   change point in the *growth rate* decides: ruptures' PELT on the bin-to-bin rates with an L2 cost
   (a change in the mean rate) and a BIC-like penalty ``2 σ² ln m`` (σ: the rates' robust spread). The
   last change point is the cut when it lies in the first half of the series; with a change point in
   the second half there is no cut. A rise that settles settles early; a series that keeps changing
   rate (a sawtooth has change points everywhere) has no warm-up to cut, and cutting to its last tooth
   would read one ramp as the trend.
3. **Sen's slope with an autocorrelation-corrected interval.** scipy's ``theilslopes`` gives the median
   pairwise slope and Sen's (1968) rank interval, which assumes independent points. Resource series are
   strongly autocorrelated, and an interval that ignores it is too narrow (Machida et al. 2013: false
   alarms). The correction is Hamed and Rao's (1998) effective sample size: pyMannKendall's
   ``hamed_rao_modification_test`` inflates the variance of Mann–Kendall's S by ``n / n*`` (only the
   significant lag autocorrelations of the detrended ranks count); the same factor widens Sen's
   interval, whose ranks are set by that variance. The inflation is never below 1: a correction may
   widen the interval, never narrow it.
4. **Three bin widths, the widest interval.** An oscillation slower than a bin but faster than the
   window tilts Sen's slope: in a rising sawtooth every pair of points within one tooth rises, so the
   median pair rises too, and no autocorrelation correction that counts only significant lags undoes
   it. Fitted over bins wider than the period, the same series is flat. So the fit is made at
   ``RESOLUTIONS`` (240, 60 and 15 bins of the analysed window), and once more over the window's later
   half, and the bound is their union: the lowest lower end, the highest upper end. A real leak raises
   every line; periodic use cannot show growth with confidence at all three resolutions; and growth
   that is slowing down (a buffer a few minutes from full, a warm-up longer than the cut could see)
   must still hold in the later half to fail, while growth that began late raises the upper end.
6. **The future's own randomness.** The rate bound is on the mean growth; the run that follows is one
   path around it. Poisson-like leaks (an fd per request) add up like a random walk and stray further
   the longer the run; memory that jitters around its level strays no further than it already does.
   The series' variogram tells which: D(h), the robust spread (1.4826 × MAD) of the detrended change
   over h fresh levels (below), up to an eighth of them (the series is detrended by its own slope,
   which absorbs a walk's slow wander at long lags), and its growth exponent (0 stationary, 0.5 a random walk). The time bound adds z·D extrapolated to T
   (``PathSpread``) to the growth at the upper rate (``exhaustion_hours``), so it bounds the time this
   path takes, not the mean one; ``fails`` asks the lower rate to exhaust the limit even with the path
   that much below its line. A steady count has no spread and loses nothing.
7. **A walk's drift.** Sen's interval, even with the Hamed–Rao correction, is built for noise around a
   line; the level of a random walk wanders, and the drift it shows over a window of T seconds is off
   the true one by a standard error of σ_w/√T (σ_w²: the walk's variance per second). In simulation
   (Poisson fd leaks and exponential-size disk writes, 20 s observed at 0.5 s) Sen's 95 % upper end
   held the true rate in only 81 % of runs. So σ_w² is fitted to the variogram, D²(h) = 2σ² +
   σ_w² h Δt (1 − h/n) (stationary noise σ, plus a walk detrended over its own n samples, whose spread
   closes again towards the window's length), by non-negative least squares over lags up to a quarter
   of the window; z·σ_w/√T is added to each end of Sen's interval in quadrature (in the same
   simulation: 93 % and 95 % of upper ends held). Noise around a line has σ_w ≈ 0 and keeps Sen's
   interval. Both variograms are over the series' **fresh levels** (the first and each that differs
   from the one before: a level read on a cost schedule, PSS or a disk walk, repeats between reads)
   and robust (a level that steps once, an allocator's arena released, is not a walk); a staircase of
   repeats, or a plain variance over one step, would read as one. harness.soak.verdicts.walk holds
   steps 6 and 7.
5. **Count series** (fds, processes, threads, zombies) move in steps. Zero net growth over a window of
   W hours does not prove a rate of 0: a leak of one fd every W/2 would look the same. The upper bound
   is at least ``count_events(confidence) / W`` (the rule of three: no event seen in W bounds the event
   rate at ``-ln(1 - confidence) / W``, 3/W at 95 %).

Every bound is one-sided at ``confidence``: 95 % for a soak judged once at its end, more for each look
of a soak that stops when it has decided (harness.soak.verdicts.looks spends the 5 % over its looks).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from soakbench.harness.soak.verdicts.walk import (
    FreshLevels,
    fresh_levels,
    robust_spread,
    walk_half_width_per_s,
)

#: One-sided confidence of each rate bound of a soak judged once: the upper bound exceeds the true rate
#: with this probability.
CONFIDENCE = 0.95
#: The most equal-time bins a series is reduced to (the statistics are O(bins²); 240 bins of a 10 min
#: soak are 2.5 s each, of a 72 h soak 18 min each).
MAX_BINS = 240
#: The fewest bins (after the warm-up cut) a bound is computed from; fewer gives no bound.
MIN_BINS = 8
#: The bin counts whose intervals are united (module docstring, step 4); finest first.
RESOLUTIONS: tuple[int, ...] = (MAX_BINS, 60, 15)
#: The later part of the window fitted on its own as well (module docstring, step 4): its last half.
LATER_FRACTION = 0.5
#: No event seen in W bounds the event rate at 3 / W (one-sided 95 %: -ln 0.05 ≈ 3.0).
COUNT_EVENTS = 3.0
#: The warm-up cut is looked for in this leading share of the series only (module docstring, step 2).
CUT_SEARCH_FRACTION = 0.5
#: The bins the change point is looked for in: PELT's cost is quadratic in them at worst (a series with
#: no noise prunes nothing), and a warm-up placed to 1/60 of the window is placed well enough.
CUT_BINS = 60
#: PELT's smallest segment, in bins: a change point needs a few bins of evidence on each side.
MIN_SEGMENT_BINS = 3
#: Sen's interval half-width narrows as W^(-3/2) for a linear trend under stationary noise; the soak
#: length that would decide is extrapolated with this exponent.
WIDTH_EXPONENT = 1.5
RATE_METHOD = (
    "Sen's slope over equal-time bin means; one-sided bounds (at the section's confidence) from Sen's rank "
    "interval with Mann–Kendall's variance inflated by the Hamed–Rao effective sample size (pyMannKendall), "
    "united over 240, 60 and 15 bins and the window's later half, widened in quadrature by z times a random "
    "walk's drift error (its variance fitted to the robust variogram); count series bounded above by at "
    "least -ln(1 - confidence) / window (3 / window at 95 %)"
)

CutMethod = Literal["declared", "change_point", "none"]


@dataclass(frozen=True)
class WarmupCut:
    """Where the analysed part of a series starts (seconds on the samples' clock) and why."""

    t_cut: float
    method: CutMethod
    change_points_t: tuple[float, ...] = ()


@dataclass(frozen=True)
class RateBound:
    """A series' growth rate per hour: Sen's slope and its one-sided ``CONFIDENCE`` bounds.

    ``variance_inflation`` is the Hamed–Rao ``n / n*`` (>= 1); ``sen_upper_per_hour`` the upper end of
    Sen's interval alone; ``walk_per_hour`` z times the standard error a random walk puts on the drift
    over the span (module docstring, step 7; 0 for noise around a line), added to each end of Sen's
    interval in quadrature; ``count_floor_per_hour`` the ``3 / W`` floor a count series' upper bound was
    held to (None for a byte series); ``span_s`` the analysed span.
    """

    rate_per_hour: float
    lower_per_hour: float
    upper_per_hour: float
    sen_upper_per_hour: float
    bins: int
    span_s: float
    variance_inflation: float
    walk_per_hour: float
    count_floor_per_hour: float | None


def equal_time_bins(
    t: npt.ArrayLike, x: npt.ArrayLike, max_bins: int = MAX_BINS
) -> tuple[np.ndarray, np.ndarray]:
    """Bin means of ``(t, x)`` over at most ``max_bins`` equal-time bins (empty bins dropped).

    Args:
        t: [n] seconds, non-decreasing.
        x: [n] levels.
    """
    tt, xx = np.asarray(t, dtype=np.float64), np.asarray(x, dtype=np.float64)
    if tt.size <= max_bins or tt[-1] <= tt[0]:
        return tt, xx
    edges = np.linspace(tt[0], tt[-1], max_bins + 1)
    index = np.clip(np.searchsorted(edges, tt, side="right") - 1, 0, max_bins - 1)
    counts = np.bincount(index, minlength=max_bins)
    keep = counts > 0
    t_mean = np.bincount(index, weights=tt, minlength=max_bins)[keep] / counts[keep]
    x_mean = np.bincount(index, weights=xx, minlength=max_bins)[keep] / counts[keep]
    return t_mean, x_mean


def warmup_cut(t: np.ndarray, x: np.ndarray, *, declared_t: float | None = None) -> WarmupCut:
    """Where the warm-up ends in ``(t, x)`` (module docstring, step 2), placed to one of ``CUT_BINS``
    equal-time bins.

    Args:
        t: [n] times in seconds, increasing.
        x: [n] levels.
        declared_t: the end of a declared warm-up (``--warmup-seconds``, on the samples' clock); it
            replaces the change-point search.
    """
    if declared_t is not None:
        return WarmupCut(t_cut=float(declared_t), method="declared")
    t, x = equal_time_bins(t, x, CUT_BINS)
    if t.size < 2 * MIN_SEGMENT_BINS + 2:
        return WarmupCut(t_cut=float(t[0]) if t.size else 0.0, method="none")
    import ruptures

    rates = np.diff(x) / np.diff(t)
    spread = robust_spread(rates)
    # An exactly repeating rate (a count series between steps) has no spread; any real change is then
    # a change point, which a tiny positive penalty keeps true.
    penalty = 2.0 * max(spread, 1e-12) ** 2 * math.log(rates.size)
    ends = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT_BINS, jump=1).fit(rates).predict(pen=penalty)
    change_t = tuple(float(t[end]) for end in ends[:-1])  # the last "end" is the series' own end
    limit_t = float(t[0] + CUT_SEARCH_FRACTION * (t[-1] - t[0]))
    if not change_t or max(change_t) > limit_t:
        return WarmupCut(t_cut=float(t[0]), method="none", change_points_t=change_t)
    return WarmupCut(t_cut=max(change_t), method="change_point", change_points_t=change_t)


def _variance_inflation(x: np.ndarray) -> float:
    """Hamed–Rao's ``n / n*`` for ``x`` (>= 1; 1 for a constant series)."""
    import pymannkendall

    # A strongly negative lag correlation can make the corrected variance negative; pyMannKendall then
    # takes a square root of it on the way to its own p-value, which this reads nothing of.
    with np.errstate(invalid="ignore", divide="ignore"):
        plain = pymannkendall.original_test(x)
        if not plain.var_s > 0:
            return 1.0
        corrected = pymannkendall.hamed_rao_modification_test(x)
    ratio = float(corrected.var_s) / float(plain.var_s)
    return max(1.0, ratio) if math.isfinite(ratio) else 1.0


def count_events(confidence: float) -> float:
    """The events a Poisson rate could have had in a window where none was seen, at one-sided
    ``confidence``: ``-ln(1 - confidence)`` (``COUNT_EVENTS`` at 95 %)."""
    return COUNT_EVENTS if confidence == CONFIDENCE else -math.log(1.0 - confidence)


def _interval_confidence(inflation: float, confidence: float) -> float:
    """The two-sided confidence to ask scipy's Sen interval for, so that each of its ends is a one-sided
    ``confidence`` bound under Mann–Kendall's variance times ``inflation``."""
    normal = statistics.NormalDist()
    z = normal.inv_cdf(confidence) * math.sqrt(inflation)
    return min(2.0 * normal.cdf(z) - 1.0, 1.0 - 1e-12)


def _sen_interval(t: np.ndarray, x: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """Sen's slope, its one-sided lower and upper bounds (per second) and the variance inflation used."""
    from scipy.stats import theilslopes

    inflation = _variance_inflation(x)
    fit = theilslopes(x, t, alpha=_interval_confidence(inflation, confidence))
    low, high = float(fit.low_slope), float(fit.high_slope)
    if not (math.isfinite(low) and math.isfinite(high)):  # the interval ran off the slopes: all of them
        slopes = np.diff(x) / np.diff(t)
        low, high = float(slopes.min()), float(slopes.max())
    return float(fit.slope), low, high, inflation


def rate_bound(
    t: npt.ArrayLike,
    x: npt.ArrayLike,
    *,
    counts: bool,
    confidence: float = CONFIDENCE,
    fresh: FreshLevels | None = None,
) -> RateBound | None:
    """The growth rate of ``(t, x)`` (the analysed window, raw samples) and its bounds per hour, or None
    when fewer than ``MIN_BINS`` bins or no time span remain (module docstring, steps 3 to 5).

    Args:
        t: [n] sample times in seconds, non-decreasing.
        x: [n] levels (bytes or counts).
        counts: whether ``x`` counts things (fds, processes): its upper bound is held to
            ``count_events(confidence) / W``.
        confidence: each bound's one-sided confidence, in (0.5, 1).
        fresh: ``fresh_levels(t, x)``, when the caller has built them already (the path's spread
            reads the same ones).
    """
    tt, xx = np.asarray(t, dtype=np.float64), np.asarray(x, dtype=np.float64)
    fits = []
    for resolution in RESOLUTIONS:
        tb, xb = equal_time_bins(tt, xx, resolution)
        if tb.size >= MIN_BINS and tb[-1] > tb[0]:
            fits.append((tb, _sen_interval(tb, xb, confidence)))
    if fits:  # the later half: growth that is slowing (a fill about to settle) must hold to fail
        later = tt >= tt[0] + LATER_FRACTION * (tt[-1] - tt[0])
        tb, xb = equal_time_bins(tt[later], xx[later], MAX_BINS)
        if tb.size >= MIN_BINS and tb[-1] > tb[0]:
            fits.append((tb, _sen_interval(tb, xb, confidence)))
    if not fits:
        return None
    finest_t, (slope, _, _, inflation) = fits[0]
    span_s = float(finest_t[-1] - finest_t[0])
    fresh = fresh if fresh is not None else fresh_levels(tt, xx)
    walk = walk_half_width_per_s(fresh, rate_per_hour=slope * 3600.0, span_s=span_s, confidence=confidence)
    low = slope - math.hypot(slope - min(fit[1] for _, fit in fits), walk)
    high = max(fit[2] for _, fit in fits)
    upper = (slope + math.hypot(high - slope, walk)) * 3600.0
    floor = None
    if counts:
        floor = count_events(confidence) / (span_s / 3600.0)
        upper = max(upper, floor)
    return RateBound(
        rate_per_hour=slope * 3600.0,
        lower_per_hour=low * 3600.0,
        upper_per_hour=upper,
        sen_upper_per_hour=high * 3600.0,
        bins=int(finest_t.size),
        span_s=span_s,
        variance_inflation=inflation,
        walk_per_hour=walk * 3600.0,
        count_floor_per_hour=floor,
    )


def decide_after_s(bound: RateBound, *, lethal_per_hour: float) -> float | None:
    """The analysed span (seconds) after which the bound would most likely sit on one side of
    ``lethal_per_hour``, if the rate estimate held, Sen's part of the interval narrowed as W^(-3/2)
    and the walk's part as W^(-1/2); None when the estimate is the lethal rate itself (no length
    decides it).

    The count floor must also fall below the lethal rate to decide ``survives``: ``W >= E / lethal``,
    with E the events the floor was set from.
    """
    rate, span_h, walk = bound.rate_per_hour, bound.span_s / 3600.0, bound.walk_per_hour
    floor_h = 0.0
    if rate < lethal_per_hour:
        sen, gap = bound.sen_upper_per_hour - rate, lethal_per_hour - rate
        if bound.count_floor_per_hour is not None:
            floor_h = bound.count_floor_per_hour * span_h / lethal_per_hour
    elif rate > lethal_per_hour:
        total, gap = rate - bound.lower_per_hour, rate - lethal_per_hour
        sen = math.sqrt(max(0.0, total * total - walk * walk))
    else:
        return None
    return max(span_h * _span_growth(sen=max(0.0, sen), walk=walk, gap=gap), floor_h) * 3600.0


def _span_growth(*, sen: float, walk: float, gap: float) -> float:
    """The factor g by which the span must grow for the half-width √((sen g^-3/2)² + (walk g^-1/2)²) to
    shrink to ``gap`` (1 when there is no width at all). The half-width falls as g grows, so bisection
    on log g finds it."""
    if sen <= 0 and walk <= 0:
        return 1.0

    def width(g: float) -> float:
        return math.hypot(sen * g**-WIDTH_EXPONENT, walk * g**-0.5)

    low, high = 1.0, 1.0
    while width(low) < gap and low > 1e-9:
        low /= 2.0
    while width(high) > gap:
        high *= 2.0
    for _ in range(60):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if width(middle) > gap else (low, middle)
    return high
