"""Noise-aware comparison of two sets of timing samples. Pure: samples in, numbers and verdicts out.

Samples come in *groups*: one group per independent process (or run), each holding that group's
repeated observations (rounds, iterations). Observations inside a group share the group's conditions
(memory layout, CPU placement, the load while it ran), so they are not independent of each other; the
confidence interval therefore comes from a two-level (hierarchical) bootstrap that resamples groups
first and observations inside each drawn group second. A flat list of independent samples is simply
one observation per group.

The compared statistic is the ratio of medians NEW/BASE. A verdict reads that ratio on a
"higher is better" scale (a time's ratio is inverted first), against a minimum effect size
``threshold``: the band ``[1/(1+threshold), 1+threshold]`` is "no change worth naming".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Groups = Sequence[Sequence[float]]
Verdict = Literal["faster", "slower", "no_change", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("faster", "slower", "no_change", "inconclusive")
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
# One-sided z of the power the "samples needed" statement is sized for (80 %).
POWER_Z = 0.8416
# 2 x sqrt(2): two standard deviations of the difference of two independent runs (see noise_floor).
NOISE_SPREAD = 2.0 * math.sqrt(2.0)


@dataclass(frozen=True)
class Summary:
    """Robust summary of one sample list: count, median, nearest-rank p95, mean and CV (stdev/mean)."""

    n: int
    median: float
    p95: float
    mean: float
    cv: float


def summarize(values: Sequence[float]) -> Summary:
    """Summary of ``values`` (at least one); the CV of a single value is 0."""
    if not values:
        raise ValueError("cannot summarize an empty sample list")
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    stdev = statistics.stdev(ordered) if n > 1 else 0.0
    return Summary(
        n=n,
        median=statistics.median(ordered),
        p95=ordered[max(1, math.ceil(0.95 * n)) - 1],
        mean=mean,
        cv=stdev / mean if mean else 0.0,
    )


def pooled(groups: Groups) -> list[float]:
    """Every observation of every group, in order."""
    return [float(v) for group in groups for v in group]


def _check_groups(name: str, groups: Groups) -> list[np.ndarray]:
    arrays = [np.asarray(group, dtype=float) for group in groups]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError(f"{name}: needs at least one non-empty group of samples")
    if any(not np.all(np.isfinite(a)) for a in arrays):
        raise ValueError(f"{name}: samples must be finite numbers")
    return arrays


def _resampled_medians(groups: list[np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Median of the pooled sample, for each of ``resamples`` two-level bootstrap draws."""
    picks = rng.integers(0, len(groups), size=(resamples, len(groups)))
    sizes = {g.size for g in groups}
    if len(sizes) == 1:  # the usual case (every process ran the same rounds): one vectorized draw
        size = sizes.pop()
        stacked = np.stack(groups)
        within = rng.integers(0, size, size=(resamples, len(groups), size))
        drawn_all = stacked[picks[:, :, None], within].reshape(resamples, -1)
        return np.asarray(np.median(drawn_all, axis=1))
    out = np.empty(resamples)
    for b in range(resamples):
        drawn = [groups[g][rng.integers(0, groups[g].size, size=groups[g].size)] for g in picks[b]]
        out[b] = np.median(np.concatenate(drawn))
    return out


@dataclass(frozen=True)
class RatioInterval:
    """NEW/BASE ratio of medians with its bootstrap confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float


def ratio_interval(
    base: Groups,
    new: Groups,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> RatioInterval:
    """Percentile interval of median(NEW)/median(BASE) from a two-level bootstrap of both sides.

    Seeded, so the same samples always give the same interval. Raises ValueError on empty groups,
    non-finite samples or a non-positive median (a ratio of such values means nothing).
    """
    base_arrays, new_arrays = _check_groups("base", base), _check_groups("new", new)
    base_median = float(np.median(np.concatenate(base_arrays)))
    new_median = float(np.median(np.concatenate(new_arrays)))
    if base_median <= 0 or new_median <= 0:
        raise ValueError("a ratio needs positive medians on both sides")
    rng = np.random.default_rng(seed)
    base_draws = _resampled_medians(base_arrays, resamples, rng)
    new_draws = _resampled_medians(new_arrays, resamples, rng)
    ratios = new_draws / np.maximum(base_draws, np.finfo(float).tiny)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return RatioInterval(new_median / base_median, float(low), float(high), confidence)


def verdict(
    interval: RatioInterval, threshold: float, *, higher_is_better: bool, noise_floor: float = 0.0
) -> Verdict:
    """``faster``/``slower``: the interval excludes 1 and the ratio lies beyond the band of
    ``max(threshold, noise_floor)``; ``no_change``: the noise floor is within the threshold and the whole
    interval lies inside the threshold's band (a change of that size is ruled out); ``inconclusive``:
    neither (the interval is too wide, or the samples' own spread is larger than the threshold)."""
    if threshold <= 0 or noise_floor < 0:
        raise ValueError(f"threshold must be > 0 and noise_floor >= 0, got {threshold}, {noise_floor}")
    ratio, low, high = _oriented(interval, higher_is_better)
    effect = max(threshold, noise_floor)
    if low > 1.0 and ratio > 1.0 + effect:
        return "faster"
    if high < 1.0 and ratio < 1.0 / (1.0 + effect):
        return "slower"
    if noise_floor <= threshold and 1.0 / (1.0 + threshold) <= low and high <= 1.0 + threshold:
        return "no_change"
    return "inconclusive"


def noise_floor(base: Groups, new: Groups) -> float:
    """The smallest change two runs on this host can be told apart by: ``NOISE_SPREAD`` times the larger
    side's coefficient of variation between its groups' medians (0 with fewer than two groups a side).

    Groups of one run run at different times, so their spread estimates how much the host's load moves
    a result; two independent runs differ by sqrt(2) times that spread in standard deviation, and a
    shift inside two such deviations is not called a change."""
    spreads = [_between_group_cv(side) for side in (base, new)]
    return NOISE_SPREAD * max(spreads)


def _between_group_cv(groups: Groups) -> float:
    if len(groups) < 2:
        return 0.0
    return summarize([statistics.median(group) for group in groups]).cv


def _oriented(interval: RatioInterval, higher_is_better: bool) -> tuple[float, float, float]:
    """(ratio, low, high) on the higher-is-better scale."""
    if higher_is_better:
        return interval.ratio, interval.low, interval.high
    return 1.0 / interval.ratio, 1.0 / interval.high, 1.0 / interval.low


def samples_factor(interval: RatioInterval, threshold: float) -> float:
    """How many times the current samples per side an 80 %-power test of a change of ``threshold``'s
    size would need, from the observed interval width (standard error shrinks as 1/sqrt(n)).

    Below 1 the current samples already suffice; an interval of zero width gives 0.
    """
    z = statistics.NormalDist().inv_cdf(0.5 + interval.confidence / 2.0)
    if interval.low <= 0:
        return math.inf
    standard_error = (math.log(interval.high) - math.log(interval.low)) / (2.0 * z)
    target = math.log1p(threshold) / (z + POWER_Z)
    return (standard_error / target) ** 2


def median_interval(
    groups: Groups,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(median, low, high): the pooled median and its two-level bootstrap percentile interval."""
    arrays = _check_groups("samples", groups)
    draws = _resampled_medians(arrays, resamples, np.random.default_rng(seed))
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return float(np.median(np.concatenate(arrays))), float(low), float(high)
