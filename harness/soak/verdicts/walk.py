"""How a resource series wanders: its fresh levels, their robust variogram, a random walk's variance, and
the spread of the path a run takes around its growth line (pure; harness.soak.verdicts.projection's
steps 6 and 7, whose docstring says why each is there).

A level read on a cost schedule (PSS, a disk walk) repeats between reads; only its *fresh levels* (the
first, and each that differs from the one before) observe the path. The variogram D(h) is the robust
spread (1.4826 × MAD, so a single step such as an arena released is not read as a walk) of the change
over h fresh levels, after the series is detrended by its own growth rate. From it:

- ``walk_variance_per_s``: σ_w², fitted as D²(h) = a + σ_w² Δt_h (1 − h/n) by non-negative least
  squares (a: stationary noise; the (1 − h/n): a walk detrended over its own n levels closes again
  towards the window's length);
- ``walk_half_width_per_s``: the term a walk adds to the interval of Sen's slope;
- ``path_spread``: how far the future path strays from its line, extrapolated from D's growth exponent;
- ``exhaustion_hours``: when the growth plus that spread first reaches the headroom.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


def robust_spread(values: np.ndarray) -> float:
    """1.4826 × the median absolute deviation: the standard deviation of normal noise, blind to spikes."""
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


@dataclass(frozen=True)
class PathSpread:
    """How far a run's path strays from its growth line (projection, step 6): ``at_lag`` is z times
    the spread of the detrended changes over the longest lag measured (``lag_hours``), in the series'
    unit; beyond it the spread grows as ``(T / lag_hours) ** exponent`` (0: stationary noise, 0.5: a
    random walk)."""

    at_lag: float
    lag_hours: float
    exponent: float

    def at(self, hours: float) -> float:
        """The spread after ``hours`` (never below the spread already measured)."""
        if self.at_lag <= 0 or self.lag_hours <= 0:
            return 0.0
        return float(self.at_lag * max(1.0, hours / self.lag_hours) ** self.exponent)


NO_SPREAD = PathSpread(at_lag=0.0, lag_hours=1.0, exponent=0.0)
#: lags (in fresh levels) the path's variogram is measured at: geometric from 1 to ``VARIOGRAM_REACH``
#: of them
VARIOGRAM_LAGS = 8
#: the path's longest lag, as a share of the window: the series is detrended by its own fitted slope,
#: which absorbs a random walk's slow wander, so a long lag reads a walk as a band (an exponent biased
#: to 0)
VARIOGRAM_REACH = 0.125
#: the lags the walk's variance is fitted over (step 7) reach this share of the window: its model
#: carries the detrending's (1 − h/n), so longer lags than the path's are usable
WALK_REACH = 0.25
#: lags (in fresh levels, geometric from 1) the walk's variance is fitted at
WALK_LAGS = 12
#: the variance of Sen's slope over a random walk's window of T seconds, in units of σ_w²/T: least
#: squares' is 6/5 (a Brownian path's regression slope), and Sen's, less efficient, 1.31 in 2000
#: simulated Gaussian walks of 200 steps (the drift of the endpoints alone would be 1)
SEN_WALK_VARIANCE = 1.3
#: the most samples a variogram is computed from; longer series are thinned to every k-th sample (a
#: walk's variogram at lag h·k is unchanged by keeping every k-th point; a 72 h soak at 1 s has 259,200)
VARIOGRAM_POINTS = 4096


@dataclass(frozen=True)
class Variogram:
    """The robust spread (1.4826 × MAD) ``spreads[i]`` of the detrended change over ``lags[i]`` fresh
    levels, which lie ``lag_s[i]`` seconds apart on average, in a series of ``n`` fresh levels."""

    lags: np.ndarray
    lag_s: np.ndarray
    spreads: np.ndarray
    n: int


@dataclass(frozen=True)
class FreshLevels:
    """The samples of a series that observe its path (``fresh_levels``): times ``t`` (seconds) and
    levels ``x``, built once per series and shared by every step that reads the walk."""

    t: np.ndarray
    x: np.ndarray

    @property
    def size(self) -> int:
        return int(self.t.size)


def last_read_index(x: npt.ArrayLike) -> np.ndarray:
    """For each sample, the index of the latest fresh level at or before it: the first sample, and each
    whose level differs from the one before (a level read on a cost schedule repeats until its next
    read)."""
    levels = np.asarray(x, dtype=np.float64)
    fresh = np.r_[True, np.diff(levels) != 0]
    return np.maximum.accumulate(np.where(fresh, np.arange(levels.size), 0))


def fresh_levels(t: npt.ArrayLike, x: npt.ArrayLike, *, read: npt.ArrayLike | None = None) -> FreshLevels:
    """The samples that observe the path. With ``read`` (a mask of the samples whose level was read
    afresh, as the sampler recorded it): the first sample and each one read, even at an unchanged
    level. Without: the first level and each one that differs from the level before it, since a level
    read on a cost schedule repeats between reads and a count that rarely moves repeats between its
    steps. The mask matters for a tree's sum: its small members, read at every sample, move a sum whose
    large member is carried, and those moves are no new observation of the large member's path."""
    tt, xx = np.asarray(t, dtype=np.float64), np.asarray(x, dtype=np.float64)
    if read is None:
        keep = np.unique(last_read_index(xx))
    else:
        mask = np.asarray(read, dtype=bool).copy()
        if mask.shape != xx.shape:
            raise ValueError(f"read: must mark each of the {xx.size} samples, got shape {mask.shape}")
        mask[:1] = True
        keep = np.flatnonzero(mask)
    return FreshLevels(t=tt[keep], x=xx[keep])


def variogram(fresh: FreshLevels, *, rate_per_hour: float, reach: float, lags: int) -> Variogram | None:
    """The robust variogram of the ``fresh`` levels detrended by ``rate_per_hour``, at up to ``lags``
    geometric lags from 1 to ``reach`` of them (None when fewer than 8 fresh levels, or no time
    passes between them)."""
    stride = max(1, -(-fresh.size // VARIOGRAM_POINTS))
    tt, xx = fresh.t[::stride], fresh.x[::stride]
    if tt.size < 8 or not tt[-1] > tt[0]:
        return None
    at = np.unique(np.geomspace(1, max(2, int(reach * tt.size)), lags).astype(int))
    residual = xx - rate_per_hour * tt / 3600.0
    spreads = np.array([robust_spread(residual[k:] - residual[:-k]) for k in at])
    lag_s = np.array([float(np.mean(tt[k:] - tt[:-k])) for k in at])
    return Variogram(lags=at, lag_s=lag_s, spreads=spreads, n=int(tt.size))


def walk_variance_per_s(fresh: FreshLevels, *, rate_per_hour: float) -> float:
    """σ_w², a random walk's variance per second in the ``fresh`` levels (squared units; projection,
    step 7): the non-negative least-squares fit of D²(h) = a + σ_w² Δt_h (1 − h/n) to their robust
    variogram; 0 when the series is too short for one."""
    from scipy.optimize import nnls

    gram = variogram(fresh, rate_per_hour=rate_per_hour, reach=WALK_REACH, lags=WALK_LAGS)
    if gram is None or gram.lags.size < 2:
        return 0.0
    walk_term = gram.lag_s * (1.0 - gram.lags / gram.n)
    design = np.column_stack([np.ones(gram.lags.size), walk_term])
    (_, per_s), _ = nnls(design, gram.spreads**2)
    return float(per_s)


def walk_half_width_per_s(
    fresh: FreshLevels, *, rate_per_hour: float, span_s: float, confidence: float
) -> float:
    """The walk's term of the rate interval (projection, step 7): Student's t quantile at
    ``confidence`` (the walk's variance is estimated, from the fresh levels less the variogram's two
    fitted parameters) times the standard error σ_w √(``SEN_WALK_VARIANCE`` / T) of Sen's slope."""
    from scipy.stats import t as student_t

    variance = walk_variance_per_s(fresh, rate_per_hour=rate_per_hour)
    if variance <= 0 or fresh.size < 4 or not span_s > 0:
        return 0.0
    quantile = float(student_t.ppf(confidence, fresh.size - 2))
    return quantile * math.sqrt(SEN_WALK_VARIANCE * variance / span_s)


def path_spread(fresh: FreshLevels, *, rate_per_hour: float, confidence: float) -> PathSpread:
    """The path's spread from the ``fresh`` levels' robust variogram (projection, step 6): D(h) at
    ``VARIOGRAM_LAGS`` lags from 1 to ``VARIOGRAM_REACH`` of the fresh levels; the exponent is
    the slope of log D against log h, held to [0, 0.5]; z is the one-sided normal quantile at
    ``confidence``."""
    gram = variogram(fresh, rate_per_hour=rate_per_hour, reach=VARIOGRAM_REACH, lags=VARIOGRAM_LAGS)
    if gram is None or not gram.spreads[-1] > 0:
        return NO_SPREAD
    positive = gram.spreads > 0
    exponent = 0.0
    if positive.sum() >= 2:
        fit = np.polyfit(np.log(gram.lag_s[positive]), np.log(gram.spreads[positive]), 1)
        exponent = float(fit[0])
    return PathSpread(
        at_lag=statistics.NormalDist().inv_cdf(confidence) * float(gram.spreads[-1]),
        lag_hours=float(gram.lag_s[-1]) / 3600.0,
        exponent=min(0.5, max(0.0, exponent)),
    )


#: the longest time to exhaustion searched for (hours; a century): beyond it, "never"
MAX_HOURS = 876_000.0


def exhaustion_hours(rate_per_hour: float, spread: PathSpread, headroom: float) -> float | None:
    """The first T (hours) at which ``rate T + spread.at(T)`` reaches ``headroom`` (None: not within
    ``MAX_HOURS``). Both terms only grow, so bisection finds it."""
    if headroom <= 0:
        return 0.0

    def reached(hours: float) -> bool:
        return rate_per_hour * hours + spread.at(hours) >= headroom

    if reached(0.0):
        return 0.0
    high = 1.0 / 64.0
    while not reached(high):
        high *= 2.0
        if high > MAX_HOURS:
            return None
    low = high / 2.0 if high > 1.0 / 64.0 else 0.0
    for _ in range(60):
        middle = (low + high) / 2.0
        low, high = (low, middle) if reached(middle) else (middle, high)
    return high
