"""The warm-up cut and the bounded growth rate (harness.soak.verdicts.projection), on series whose true
rate is known."""

from __future__ import annotations

import numpy as np
import pytest

from soakbench.harness.soak.verdicts.projection import (
    COUNT_EVENTS,
    PathSpread,
    decide_after_s,
    equal_time_bins,
    exhaustion_hours,
    path_spread,
    rate_bound,
    warmup_cut,
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
    jitter = path_spread(t, 1e9 + rng.normal(0.0, 4 * MIB, t.size), rate_per_hour=0.0)
    walk = path_spread(t, np.cumsum(rng.poisson(0.5, t.size)).astype(float), rate_per_hour=1800.0)
    assert jitter.exponent < 0.1 and walk.exponent > 0.35
    assert jitter.at(72.0) < 2.0 * jitter.at_lag  # a band does not widen with the horizon
    assert walk.at(72.0) > 10.0 * walk.at_lag  # a random walk strays further the longer it runs
    assert path_spread(t, np.full(t.size, 7.0), rate_per_hour=0.0).at(72.0) == 0.0


def test_the_time_to_exhaustion_adds_the_path_spread_to_the_rate():
    spread = PathSpread(at_lag=10.0, lag_hours=0.1, exponent=0.5)
    plain = exhaustion_hours(100.0, PathSpread(0.0, 1.0, 0.0), 1000.0)
    assert plain == pytest.approx(10.0, rel=1e-6)
    with_path = exhaustion_hours(100.0, spread, 1000.0)
    assert with_path is not None and with_path < plain
    assert with_path * 100.0 + spread.at(with_path) == pytest.approx(1000.0, rel=1e-6)
    assert exhaustion_hours(0.0, PathSpread(0.0, 1.0, 0.0), 1000.0) is None
