"""The warm-up cut and the bounded growth rate (harness.soak.verdicts.projection), on series whose true
rate is known."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soakbench.harness.soak.verdicts.projection import (
    CONFIDENCE,
    COUNT_EVENTS,
    decide_after_s,
    equal_time_bins,
    rate_bound,
    warmup_cut,
)
from soakbench.harness.soak.verdicts.walk import (
    PathSpread,
    exhaustion_hours,
    fresh_levels,
    last_read_index,
    path_spread,
    walk_variance_per_s,
)

MIB = float(1 << 20)


def _ar1(rng: np.random.Generator, n: int, *, phi: float, sigma: float) -> np.ndarray:
    """AR(1) noise: the sample-to-sample correlation of a resident-memory series."""
    noise = np.empty(n)
    noise[0] = rng.normal(0.0, sigma)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + rng.normal(0.0, sigma)
    return noise


def _cut_and_bound(t: np.ndarray, x: np.ndarray, *, counts: bool = False):
    tb, xb = equal_time_bins(t, x)
    cut = warmup_cut(tb, xb)
    keep = t >= cut.t_cut
    return cut, rate_bound(t[keep], x[keep], counts=counts)


def test_a_leak_under_autocorrelated_noise_is_bounded_away_from_zero_and_its_rate_is_covered():
    rng = np.random.default_rng(1)
    t = np.arange(600.0)
    rate_per_s = 300 * MIB / 3600.0
    x = 2e9 + rate_per_s * t + _ar1(rng, t.size, phi=0.9, sigma=2 * MIB)
    cut, bound = _cut_and_bound(t, x)
    assert cut.method == "none"
    assert bound is not None
    assert bound.lower_per_hour > 0
    assert bound.lower_per_hour <= 300 * MIB <= bound.upper_per_hour
    assert bound.variance_inflation >= 1.0


def test_the_upper_bound_covers_the_true_rate_of_autocorrelated_series_at_least_nine_times_in_ten():
    """The bound's promise, checked by simulation: 100 series (seeded), AR(1) noise with phi 0.8, a
    known rate; the one-sided 95 % upper bound must not fall below it in more than 10 of them."""
    rng = np.random.default_rng(7)
    t = np.arange(0.0, 600.0, 1.0)
    rate_per_s = 50 * MIB / 3600.0
    below = 0
    for _ in range(100):
        x = 1e9 + rate_per_s * t + _ar1(rng, t.size, phi=0.8, sigma=1 * MIB)
        bound = rate_bound(t, x, counts=False)
        assert bound is not None
        below += bound.upper_per_hour < 50 * MIB
    assert below <= 10


def test_a_buffer_that_fills_and_then_plateaus_is_cut_at_its_plateau_and_does_not_grow():
    rng = np.random.default_rng(2)
    t = np.arange(600.0)
    x = 1e9 + np.minimum(t, 150.0) * 4 * MIB + rng.normal(0.0, 1 * MIB, t.size)
    cut, bound = _cut_and_bound(t, x)
    assert cut.method == "change_point"
    assert 120.0 <= cut.t_cut <= 200.0
    assert bound is not None
    assert bound.lower_per_hour <= 0.0
    assert bound.upper_per_hour < 100 * MIB  # the fill itself ran at 14 GiB/h


@pytest.mark.parametrize("period_s", [20.0, 60.0, 150.0])
def test_a_sawtooth_never_shows_growth_with_confidence(period_s: float):
    t = np.arange(600.0)
    fds = 150.0 + np.floor((t % period_s) / period_s * 40.0)  # opens 40 fds, closes them all, again
    cut, bound = _cut_and_bound(t, fds, counts=True)
    assert bound is not None
    assert bound.lower_per_hour <= 0.0, (cut, bound)


def test_a_constant_count_is_bounded_by_three_events_per_window_not_by_zero():
    t = np.arange(0.0, 1200.0, 2.0)
    bound = rate_bound(t, np.full(t.size, 150.0), counts=True)
    assert bound is not None
    assert bound.rate_per_hour == 0.0
    assert bound.count_floor_per_hour == pytest.approx(COUNT_EVENTS / (bound.span_s / 3600.0))
    assert bound.upper_per_hour == bound.count_floor_per_hour


def test_a_declared_warmup_replaces_the_change_point_search():
    t = np.arange(100.0)
    cut = warmup_cut(t, np.zeros(t.size), declared_t=42.0)
    assert (cut.t_cut, cut.method) == (42.0, "declared")


def test_too_few_points_give_no_bound():
    assert rate_bound(np.arange(5.0), np.arange(5.0), counts=False) is None


def test_the_soak_length_that_would_decide_grows_as_the_gap_to_the_lethal_rate_shrinks():
    t = np.arange(0.0, 600.0)
    rng = np.random.default_rng(3)
    bound = rate_bound(t, 1e9 + rng.normal(0.0, 4 * MIB, t.size), counts=False)
    assert bound is not None
    width = bound.upper_per_hour - bound.rate_per_hour
    near = decide_after_s(bound, lethal_per_hour=bound.rate_per_hour + width / 2.0)
    far = decide_after_s(bound, lethal_per_hour=bound.rate_per_hour + width / 1.1)
    assert near is not None and far is not None
    assert near > far > bound.span_s * 0.99
    assert decide_after_s(bound, lethal_per_hour=bound.rate_per_hour) is None


def test_a_count_series_needs_three_lethal_events_of_window_to_survive():
    t = np.arange(0.0, 600.0)
    bound = rate_bound(t, np.full(t.size, 10.0), counts=True)
    assert bound is not None
    lethal = 6.0  # per hour: the floor of a 10 min window is 18/h
    assert decide_after_s(bound, lethal_per_hour=lethal) == pytest.approx(COUNT_EVENTS / lethal * 3600.0)


def test_the_path_spread_stays_flat_for_jitter_and_grows_as_a_random_walk_for_counts():
    rng = np.random.default_rng(5)
    t = np.arange(0.0, 600.0)
    jitter = path_spread(
        fresh_levels(t, 1e9 + rng.normal(0.0, 4 * MIB, t.size)), rate_per_hour=0.0, confidence=CONFIDENCE
    )
    walk = path_spread(
        fresh_levels(t, np.cumsum(rng.poisson(0.5, t.size)).astype(float)),
        rate_per_hour=1800.0,
        confidence=CONFIDENCE,
    )
    assert jitter.exponent < 0.1 and walk.exponent > 0.35
    assert jitter.at(72.0) < 2.0 * jitter.at_lag  # a band does not widen with the horizon
    assert walk.at(72.0) > 10.0 * walk.at_lag  # a random walk strays further the longer it runs
    assert (
        path_spread(fresh_levels(t, np.full(t.size, 7.0)), rate_per_hour=0.0, confidence=CONFIDENCE).at(72.0)
        == 0.0
    )


def test_the_time_to_exhaustion_adds_the_path_spread_to_the_rate():
    spread = PathSpread(at_lag=10.0, lag_hours=0.1, exponent=0.5)
    plain = exhaustion_hours(100.0, PathSpread(0.0, 1.0, 0.0), 1000.0)
    assert plain == pytest.approx(10.0, rel=1e-6)
    with_path = exhaustion_hours(100.0, spread, 1000.0)
    assert with_path is not None and with_path < plain
    assert with_path * 100.0 + spread.at(with_path) == pytest.approx(1000.0, rel=1e-6)
    assert exhaustion_hours(0.0, PathSpread(0.0, 1.0, 0.0), 1000.0) is None


def _poisson_walk(rng: np.random.Generator, *, per_s: float, seconds: float, step_s: float) -> np.ndarray:
    """Counts of a Poisson process of ``per_s`` events a second, read every ``step_s``: an fd leaked
    per request, or a file written per checkpoint."""
    return np.cumsum(rng.poisson(per_s * step_s, int(seconds / step_s))).astype(float)


def test_the_upper_bound_covers_a_random_walks_drift_as_often_as_it_promises():
    """The calibration runs' case (benchmarks/survival_calibration.py), simulated: 300 Poisson fd leaks
    observed for 20 s at 0.5 s. The one-sided 95 % upper end must hold the true rate in at least 90 %
    of them (it holds in 81 % without the walk's term, step 7), and the walk's term must be what lifts it."""
    rng = np.random.default_rng(11)
    t = np.arange(0.0, 20.0, 0.5)
    held = sen_held = 0
    for _ in range(300):
        per_s = rng.uniform(2.0, 8.0)
        bound = rate_bound(t, _poisson_walk(rng, per_s=per_s, seconds=20.0, step_s=0.5), counts=True)
        assert bound is not None
        held += bound.upper_per_hour >= per_s * 3600.0
        sen_held += bound.sen_upper_per_hour >= per_s * 3600.0
    assert held >= 270
    assert sen_held < held - 15


def test_the_walk_variance_is_read_from_a_walk_and_not_from_jitter_around_a_line():
    rng = np.random.default_rng(12)
    t = np.arange(0.0, 600.0)
    walk = np.cumsum(rng.normal(0.0, 2.0, t.size))  # variance 4 per second
    assert 2.0 <= walk_variance_per_s(fresh_levels(t, walk), rate_per_hour=0.0) <= 8.0
    jitter = 100.0 + 0.01 * t + rng.normal(0.0, 2.0, t.size)
    assert walk_variance_per_s(fresh_levels(t, jitter), rate_per_hour=36.0) < 0.05 * 4.0


def test_a_level_that_steps_once_is_not_read_as_a_walk():
    """An allocator arena released mid-soak: one step of 64 MiB. A plain variance of the lagged changes
    would grow with the lag as a walk's does; the robust one sees the step in a minority of pairs."""
    rng = np.random.default_rng(13)
    t = np.arange(0.0, 600.0)
    x = 2e9 + np.where(t < 200.0, 64 * MIB, 0.0) + rng.normal(0.0, 1 * MIB, t.size)
    step_as_walk = (64 * MIB) ** 2 / 600.0  # the variance per second a walk reaching the step would have
    assert walk_variance_per_s(fresh_levels(t, x), rate_per_hour=0.0) < 0.01 * step_as_walk


def test_repeated_reads_are_not_fresh_levels_and_do_not_change_the_walk():
    """PSS read every 8th sample repeats in between: the repeats are dropped, so the held series gives
    the walk of its reads, not a staircase's."""
    rng = np.random.default_rng(14)
    reads = np.cumsum(rng.normal(0.0, 3.0, 75))
    t = np.arange(0.0, 600.0)
    held = np.repeat(reads, 8)
    fresh = fresh_levels(t, held)
    assert fresh.x.tolist() == reads.tolist() and fresh.t.tolist() == t[::8].tolist()
    assert walk_variance_per_s(fresh_levels(t, held), rate_per_hour=0.0) == pytest.approx(
        walk_variance_per_s(fresh_levels(t[::8], reads), rate_per_hour=0.0)
    )


def test_a_read_mask_keeps_the_large_members_reads_not_the_small_ones_moves():
    """A tree's PSS sum: the 1 GiB trainer is read every 6th sample and walks; a 20 MiB helper is read
    at every sample and jitters, so the sum differs at every sample. The mask keeps the trainer's reads
    (and a read at an unchanged level), so the walk is the trainer's, not the helper's jitter."""
    rng = np.random.default_rng(16)
    t = np.arange(0.0, 600.0) * 5.0
    trainer = np.repeat(1e9 + np.cumsum(rng.normal(0.0, 2e6, 100)), 6)
    trainer[6:12] = trainer[0]
    helper = 20e6 + rng.normal(0.0, 1e5, t.size)
    read = np.zeros(t.size, dtype=bool)
    read[::6] = True
    total = trainer + helper
    fresh = fresh_levels(t, total, read=read)
    assert fresh.t.tolist() == t[::6].tolist()
    assert fresh_levels(t, total).size == t.size
    with pytest.raises(ValueError, match="read: must mark each of the 600 samples"):
        fresh_levels(t, total, read=read[:-1])


def test_each_sample_knows_its_last_fresh_read():
    """A held level points back to the read that set it; a level read again at the same value cannot be
    told from a repeat and counts as held (fresh_levels keeps exactly the indices pointed to)."""
    levels = np.array([5.0, 5.0, 7.0, 7.0, 7.0, 6.0, 6.0, 9.0])
    assert last_read_index(levels).tolist() == [0, 0, 2, 2, 2, 5, 5, 7]
    fresh = fresh_levels(np.arange(8.0) * 5.0, levels)
    assert fresh.t.tolist() == [0.0, 10.0, 25.0, 35.0] and fresh.x.tolist() == [5.0, 7.0, 6.0, 9.0]
    assert fresh.size == 4


def test_a_walk_needs_a_longer_soak_to_decide_than_noise_around_a_line():
    """Sen's part of the interval narrows as W^(-3/2), a walk's only as W^(-1/2)."""
    rng = np.random.default_rng(15)
    t = np.arange(0.0, 600.0)
    walk = rate_bound(t, _poisson_walk(rng, per_s=1.0, seconds=600.0, step_s=1.0), counts=True)
    assert walk is not None and walk.walk_per_hour > 0
    lethal = walk.rate_per_hour + (walk.upper_per_hour - walk.rate_per_hour) / 2.0
    without = dataclasses.replace(walk, walk_per_hour=0.0, upper_per_hour=walk.sen_upper_per_hour)
    with_walk_s = decide_after_s(walk, lethal_per_hour=lethal)
    sen_only_s = decide_after_s(without, lethal_per_hour=lethal)
    assert with_walk_s is not None and sen_only_s is not None
    assert with_walk_s > sen_only_s


def test_sens_slope_over_a_random_walk_has_the_variance_the_walk_term_assumes():
    """SEN_WALK_VARIANCE, measured again: Sen's slope over Gaussian walks of 200 steps (seeded) varies
    by about 1.3 σ²/T, more than least squares' 6/5."""
    from scipy.stats import theilslopes

    from soakbench.harness.soak.verdicts.walk import SEN_WALK_VARIANCE

    rng = np.random.default_rng(16)
    t = np.arange(200.0)
    slopes = [theilslopes(np.cumsum(rng.normal(0.0, 1.0, t.size)), t).slope for _ in range(600)]
    assert abs(float(np.var(slopes)) * t.size - SEN_WALK_VARIANCE) < 0.2
