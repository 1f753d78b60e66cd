"""Leak verdicts on synthetic resource series (harness/soak/verdicts/trends.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soakbench.harness.soak.verdicts.trends import (
    MIB,
    RESOURCE_CLASSES,
    classify_series,
    leak_verdicts,
    level_text,
    mann_kendall,
    theil_sen_slope,
)

BASE = {
    "process_count": 4,
    "rss_bytes": 900 * MIB,
    "pss_bytes": 700 * MIB,
    "threads": 40,
    "gpu_memory_bytes": None,
    "eventfd": 12,
    "shared_memory_fd": 6,
    "fd_total": 80,
}


def make_samples(
    n: int, dt: float, overrides: dict[str, Callable[[float], float | None]]
) -> list[dict[str, Any]]:
    """n samples every dt s; each totals field is BASE unless a function of t overrides it."""
    samples = []
    for i in range(n):
        t = i * dt
        totals: dict[str, Any] = dict(BASE)
        for key, fn in overrides.items():
            value = fn(t)
            totals[key] = None if value is None else (round(value) if key != "rss_bytes" else value)
        samples.append({"t": t, "wall": 1.7e9 + t, "totals": totals})
    return samples


def verdicts(samples: Sequence[dict[str, Any]], startup: float = 30.0) -> dict[str, str]:
    found: dict[str, str] = leak_verdicts(samples, startup).verdicts
    return found


def test_flat_run_is_bounded_and_gpu_without_nvml_is_insufficient() -> None:
    result = leak_verdicts(make_samples(200, 5.0, {}), 30.0)
    v = result.verdicts
    assert set(v) == set(RESOURCE_CLASSES)
    assert v["gpu_memory"] == "insufficient_data"
    assert "null" in result.trends["gpu_memory"]["reason"]
    assert all(v[c] == "bounded" for c in RESOURCE_CLASSES if c != "gpu_memory")
    window = result.trends["fd_total"]["window"]
    # 194 post-start-up samples (30..995 s); the last ceil(5 %) = 10 are teardown -> ends at 945 s;
    # the window is the later two thirds of 30..945 s
    assert window["tail_excluded"] == 10 and window["t_end"] == 945.0
    assert window["t_start"] == pytest.approx(30.0 + (945.0 - 30.0) / 3.0)


@pytest.mark.parametrize("period_s", [2.0, 5.0, 20.0, 60.0])
def test_fd_leak_of_several_speeds_is_growing(period_s: float) -> None:
    """One eventfd leaked every period_s seconds over a 30 min soak sampled every 5 s."""
    leak = lambda t: 12 + t // period_s  # noqa: E731
    samples = make_samples(360, 5.0, {"eventfd": leak, "fd_total": lambda t: 80 + t // period_s})
    v = verdicts(samples)
    assert v["eventfd"] == "growing"
    assert v["fd_total"] == "growing"
    assert v["shared_memory_fd"] == "bounded"


def test_short_fast_leak_like_a_fault_injection_program_is_growing() -> None:
    """A 40 s run sampled at 0.5 s that leaks one shm fd per second."""
    samples = make_samples(80, 0.5, {"shared_memory_fd": lambda t: 2 + t // 1.0})
    assert verdicts(samples, startup=2.0)["shared_memory_fd"] == "growing"


def test_rss_leak_with_noise_is_growing_and_noise_alone_is_bounded() -> None:
    rng = np.random.default_rng(7)
    noise = {round(i * 5.0, 6): float(rng.normal(0, 20 * MIB)) for i in range(360)}
    leaking = make_samples(360, 5.0, {"rss_bytes": lambda t: 2e9 + 0.4 * MIB * t + noise[round(t, 6)]})
    noisy = make_samples(360, 5.0, {"rss_bytes": lambda t: 2e9 + noise[round(t, 6)]})
    assert verdicts(leaking)["rss"] == "growing"
    assert verdicts(noisy)["rss"] == "bounded"


def test_slow_drift_below_the_size_floor_is_bounded() -> None:
    """+20 MiB over 30 min of a 3 GiB process: a real trend, too small to call a leak."""
    samples = make_samples(360, 5.0, {"rss_bytes": lambda t: 3 * 1024 * MIB + 20 * MIB * t / 1800})
    result = leak_verdicts(samples, 30.0)
    assert result.verdicts["rss"] == "bounded"
    assert "below the required" in result.trends["rss"]["reason"]


def test_replay_fill_then_plateau_is_bounded() -> None:
    """RSS rises by 2 GiB while the replay buffer fills (until 700 s), then stays flat with noise."""
    rng = np.random.default_rng(3)
    fill = lambda t: 1e9 + 2048 * MIB * min(t, 700.0) / 700.0 + rng.normal(0, 5 * MIB)  # noqa: E731
    assert verdicts(make_samples(360, 5.0, {"rss_bytes": fill}))["rss"] == "bounded"


@pytest.mark.parametrize("step_at", [400.0, 900.0, 1200.0, 1500.0])
def test_step_then_flat_is_bounded(step_at: float) -> None:
    """A worker pool that grows once (e.g. 20 more fds) and then stays: not a leak."""
    step = lambda t: 80 + (20 if t >= step_at else 0)  # noqa: E731
    result = leak_verdicts(make_samples(360, 5.0, {"fd_total": step}), 30.0)
    assert result.verdicts["fd_total"] == "bounded", result.trends["fd_total"]["reason"]


def test_staircase_of_leaked_processes_is_growing() -> None:
    """A process left behind every 2 minutes."""
    samples = make_samples(360, 5.0, {"process_count": lambda t: 4 + t // 120})
    assert verdicts(samples)["process_count"] == "growing"


def test_sawtooth_is_bounded() -> None:
    """fds that pile up and are closed every 100 s, and an RSS sawtooth of 1.5 GiB (GC cycles)."""
    saw_fd = lambda t: 80 + (t % 100.0) // 5  # noqa: E731
    saw_rss = lambda t: 2e9 + 1536 * MIB * (t % 300.0) / 300.0  # noqa: E731
    v = verdicts(make_samples(360, 5.0, {"fd_total": saw_fd, "rss_bytes": saw_rss}))
    assert v["fd_total"] == "bounded"
    assert v["rss"] == "bounded"


def test_teardown_drop_at_the_end_does_not_hide_a_leak() -> None:
    """The trainer leaks an fd every 5 s; in the last 8 s the tree stops and its fds fall to a few."""
    leak = lambda t: 80 + t // 5 if t < 1192 else 6  # noqa: E731
    samples = make_samples(240, 5.0, {"fd_total": leak})
    assert verdicts(samples)["fd_total"] == "growing"


def test_window_ends_before_the_finalize_phase() -> None:
    samples = make_samples(240, 5.0, {"fd_total": lambda t: 80 + t // 5 if t < 900 else 4})
    for sample in samples:
        sample["progress"] = {"phase": "finalize" if sample["t"] >= 900 else "train"}
    result = leak_verdicts(samples, 30.0)
    window = result.trends["fd_total"]["window"]
    assert window["finalize_cut_t"] == 900.0 and window["t_end"] < 900.0
    assert result.verdicts["fd_total"] == "growing"


def test_too_few_samples_is_insufficient_data() -> None:
    result = leak_verdicts(make_samples(12, 5.0, {"fd_total": lambda t: 80 + t}), 30.0)
    assert result.verdicts["fd_total"] == "insufficient_data"
    assert "fewer than" in result.trends["fd_total"]["reason"]


def test_startup_never_ended_or_no_samples_is_insufficient_data() -> None:
    result = leak_verdicts(make_samples(100, 5.0, {}), None)
    assert set(result.verdicts.values()) == {"insufficient_data"}
    empty = leak_verdicts([], 0.0)
    assert set(empty.verdicts.values()) == {"insufficient_data"}
    assert empty.trends["rss"]["reason"] == "no samples were taken"
    late = leak_verdicts(make_samples(10, 1.0, {}), 7.0)
    assert late.trends["fd_total"]["reason"].startswith("no samples after start-up")


def test_gpu_memory_leak_is_growing_when_nvml_reports() -> None:
    samples = make_samples(200, 5.0, {"gpu_memory_bytes": lambda t: 4e9 + 1 * MIB * t})
    assert verdicts(samples)["gpu_memory"] == "growing"


def test_trend_record_carries_method_window_slopes_and_thresholds() -> None:
    samples = make_samples(360, 5.0, {"eventfd": lambda t: 12 + t // 5})
    trend = leak_verdicts(samples, 30.0).trends["eventfd"]
    assert trend["method"] == "mann-kendall+theil-sen"
    assert trend["slope_per_s"] == pytest.approx(0.2, rel=0.05)
    assert trend["slope_per_hour"] == pytest.approx(trend["slope_per_s"] * 3600)
    assert trend["mann_kendall"]["p_value_increasing"] < 0.01
    assert trend["thresholds"]["min_absolute_growth"] == 3.0
    assert trend["window"]["n"] > 200


def test_malformed_sample_names_the_index() -> None:
    samples = make_samples(20, 1.0, {})
    samples[7]["totals"]["fd_total"] = "many"
    with pytest.raises(ValueError, match=r"samples\[7\]\.totals\.fd_total"):
        leak_verdicts(samples, 0.0)


def test_statistics_match_hand_computed_values() -> None:
    mk = mann_kendall([1, 2, 2, 3])
    # pairs: (1,2)+ (1,2)+ (1,3)+ (2,2)0 (2,3)+ (2,3)+  -> S=5; one tie group of 2
    assert mk["s"] == 5
    assert mk["var_s"] == pytest.approx((4 * 3 * 13 - 2 * 1 * 9) / 18)
    assert theil_sen_slope([0, 1, 2, 3], [0, 2, 4, 6]) == pytest.approx(2.0)


def test_long_windows_are_reduced_to_block_medians() -> None:
    t = np.arange(20000) * 0.5
    verdict, details = classify_series(t, 100 + t // 3, min_absolute_growth=3.0)
    assert verdict == "growing"
    assert details["points"] == 1500


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.lists(st.integers(0, 10_000), min_size=1, max_size=25),
    repeats=st.integers(4, 12),
    base=st.integers(0, 1000),
)
def test_any_exactly_periodic_series_is_never_growing(pattern: list[int], repeats: int, base: int) -> None:
    """Period at most a quarter of the window: quarter medians are equal, so persistence fails."""
    values = np.tile(np.asarray(pattern, float) + base, repeats)
    t = np.arange(values.size, dtype=float)
    verdict, _ = classify_series(t, values, min_absolute_growth=1.0)
    assert verdict != "growing"


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.2, 5.0), n=st.integers(24, 300), offset=st.integers(0, 500))
def test_any_steady_integer_leak_above_the_floor_is_growing(rate: float, n: int, offset: int) -> None:
    t = np.arange(n, dtype=float)
    values = offset + np.floor(rate * t)
    growth = rate * (n - 1)
    verdict, details = classify_series(t, values, min_absolute_growth=3.0)
    if growth >= max(3.0 + rate, 0.05 * (offset + growth) + rate):
        assert verdict == "growing", details["reason"]


def test_byte_levels_in_a_reason_are_spelled_for_a_person() -> None:
    assert level_text(515_573, "bytes") == "503 KiB"
    assert level_text(1.07229e8, "bytes") == "102 MiB"
    assert level_text(-3 * (1 << 30), "bytes") == "-3 GiB"
    assert level_text(512, "bytes") == "512 B"
    assert level_text(12.0, "count") == "12"
    t = np.arange(60, dtype=float)
    flat_memory = 400 * (1 << 20) + (t % 3) * 4096  # noise, no leak
    _, details = classify_series(t, flat_memory + t * 10, min_absolute_growth=64 * (1 << 20), unit="bytes")
    assert "MiB" in details["reason"] and "e+" not in details["reason"], details["reason"]
