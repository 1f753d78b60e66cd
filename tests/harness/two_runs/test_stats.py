"""The comparison statistics on synthetic samples with known answers: summaries, the bootstrap interval,
the verdict rule and the samples-needed statement; and the probe summary recomputed from raw samples."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from soakbench.harness.probe.samples import backend_summary, raw_disagreements, round_rates, stability
from soakbench.harness.two_runs.stats import (
    NOISE_SPREAD,
    RatioInterval,
    noise_floor,
    ratio_interval,
    samples_factor,
    summarize,
    verdict,
)


def _groups(center: float, spread: float, seed: int, groups: int = 3, size: int = 20) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(center * (1 + spread * rng.standard_normal(size))) for _ in range(groups)]


def test_summary_of_known_values() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.n, s.median, s.p95, s.mean) == (5, 3.0, 100.0, 22.0)
    assert s.cv == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1) / 22.0)
    assert summarize([5.0]).cv == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_identical_tight_samples_are_no_change() -> None:
    base, new = _groups(100.0, 0.01, 1), _groups(100.0, 0.01, 2)
    interval = ratio_interval(base, new)
    assert interval.low < 1.0 < interval.high and interval.high - interval.low < 0.02
    assert verdict(interval, 0.05, higher_is_better=True) == "no_change"


def test_a_clear_drop_is_slower_for_a_rate_and_faster_for_a_time() -> None:
    base, new = _groups(100.0, 0.02, 1), _groups(80.0, 0.02, 2)
    interval = ratio_interval(base, new)
    assert interval.ratio == pytest.approx(0.8, rel=0.02) and interval.high < 1.0
    assert verdict(interval, 0.05, higher_is_better=True) == "slower"
    assert verdict(interval, 0.05, higher_is_better=False) == "faster"  # 20 % less time per iteration


def test_wide_samples_are_inconclusive_and_say_how_many_more_are_needed() -> None:
    base, new = _groups(100.0, 0.3, 1, size=4), _groups(100.0, 0.3, 2, size=4)
    interval = ratio_interval(base, new)
    assert verdict(interval, 0.05, higher_is_better=True) == "inconclusive"
    assert samples_factor(interval, 0.05) > 4


def test_the_interval_is_seeded_and_rejects_bad_samples() -> None:
    base, new = _groups(10.0, 0.1, 1), _groups(10.0, 0.1, 2)
    assert ratio_interval(base, new) == ratio_interval(base, new)
    with pytest.raises(ValueError):
        ratio_interval([[]], new)
    with pytest.raises(ValueError):
        ratio_interval([[1.0, math.nan]], new)
    with pytest.raises(ValueError):
        ratio_interval([[0.0, 0.0]], new)
    with pytest.raises(ValueError):  # groups of different sizes take the general path
        ratio_interval([[1.0], [1.0, 2.0]], [[]])


def test_unequal_group_sizes_give_a_sane_interval() -> None:
    interval = ratio_interval([[10.0, 10.2], [9.9, 10.1, 10.0]], [[5.0, 5.1, 4.9], [5.0]])
    assert interval.high < 0.6 and verdict(interval, 0.05, higher_is_better=True) == "slower"


@pytest.mark.parametrize(
    ("ratio", "low", "high", "expected"),
    [
        (0.90, 0.85, 0.94, "slower"),  # excludes 1, beyond the band
        (0.97, 0.96, 0.98, "no_change"),  # a real but smaller-than-threshold change
        (0.97, 0.90, 0.99, "inconclusive"),  # significant, but a 5 % drop is not ruled out
        (1.00, 0.90, 1.10, "inconclusive"),  # too wide
        (1.10, 1.06, 1.14, "faster"),
        (0.952, 0.953, 1.049, "no_change"),  # the band is 1/1.05 .. 1.05
    ],
)
def test_verdict_rule(ratio: float, low: float, high: float, expected: str) -> None:
    assert verdict(RatioInterval(ratio, low, high, 0.95), 0.05, higher_is_better=True) == expected


def test_a_noise_floor_above_the_threshold_raises_the_effect_and_forbids_no_change() -> None:
    tight = RatioInterval(0.90, 0.88, 0.92, 0.95)
    assert verdict(tight, 0.05, higher_is_better=True, noise_floor=0.08) == "slower"
    assert verdict(tight, 0.05, higher_is_better=True, noise_floor=0.20) == "inconclusive"
    same = RatioInterval(1.0, 0.99, 1.01, 0.95)
    assert verdict(same, 0.05, higher_is_better=True, noise_floor=0.06) == "inconclusive"
    assert verdict(same, 0.05, higher_is_better=True, noise_floor=0.04) == "no_change"


def test_noise_floor_is_the_spread_between_group_medians() -> None:
    base = [[10.0, 10.0], [12.0, 12.0]]  # medians 10 and 12: CV = stdev / mean = 1.414 / 11
    new = [[10.0], [10.0]]
    assert noise_floor(base, new) == pytest.approx(NOISE_SPREAD * math.sqrt(2.0) / 11.0)
    assert noise_floor([[1.0, 5.0]], [[3.0]]) == 0.0  # one group a side: no between-group spread


def test_verdict_needs_a_positive_threshold() -> None:
    with pytest.raises(ValueError, match="threshold"):
        verdict(RatioInterval(1.0, 0.9, 1.1, 0.95), 0.0, higher_is_better=True)


def test_samples_factor_known_answer() -> None:
    # half-width in log space 1.96 * se; se = log(1.05) / (1.96 + 0.8416) needs factor 1 exactly
    se = math.log(1.05) / (1.959964 + 0.8416)
    interval = RatioInterval(1.0, math.exp(-1.959964 * se), math.exp(1.959964 * se), 0.95)
    assert samples_factor(interval, 0.05) == pytest.approx(1.0, rel=1e-4)
    doubled = RatioInterval(1.0, interval.low**2, interval.high**2, 0.95)  # twice the width: 4x samples
    assert samples_factor(doubled, 0.05) == pytest.approx(4.0, rel=1e-4)


def _process(scale: float) -> dict[str, Any]:
    """A worker block reduced to what the raw-sample logic reads: 8 envs, decimation 4."""
    rounds: list[dict[str, Any]] = []
    for ms in ([10.0, 10.0], [5.0, 5.0]):
        raw = {"iteration_ms": [m * scale for m in ms], "physics_steps": 3200, "physics_s": 1.0}
        rounds.append({**round_rates(8, 4, raw), **raw})
    samples = [10.0 * scale, 12.0 * scale]
    phases = {key: samples for key in ("physics_exchange_ms", "update_state_ms", "reset_selection_ms")}
    phases |= {"backend_reset_ms": samples, "reset_publication_ms": samples, "iteration_ms": samples}
    env_ms = [m for r in rounds for m in r["iteration_ms"]]
    return {
        "num_envs": 8,
        "decimation": 4,
        "rounds": rounds,
        "phase_samples_ms": phases,
        "efficiency": float(np.median([r["efficiency"] for r in rounds])),
        "throughput_env_control_steps_per_s": 8 * len(env_ms) / (sum(env_ms) / 1e3),
    }


def test_round_rates_and_summary_from_raw_samples() -> None:
    rates = round_rates(8, 4, {"iteration_ms": [10.0], "physics_steps": 3200, "physics_s": 1.0})
    assert rates == {"env_control_steps_per_s": 800.0, "physics_steps_per_s": 3200.0, "efficiency": 1.0}
    processes = [_process(1.0), _process(1.0)]
    summary = backend_summary(processes)
    assert summary["env_control_steps_per_s"]["n"] == 4
    assert summary["env_control_steps_per_s"]["median"] == pytest.approx(1200.0)
    assert summary["phases"]["iteration_ms"]["median"] == pytest.approx(11.0)
    flag = stability(processes)
    assert flag["unstable"] is True and "between rounds" in flag["reasons"][0]  # 800 vs 1600 per round


def test_a_stated_figure_that_the_raw_samples_do_not_give_is_named() -> None:
    processes = [_process(1.0), _process(1.1)]
    artifact: dict[str, Any] = {
        "backends": {
            "mujoco": {
                "processes": processes,
                "summary": backend_summary(processes),
                "stability": stability(processes),
            }
        }
    }
    assert raw_disagreements(artifact) == []
    artifact["backends"]["mujoco"]["summary"]["efficiency"]["median"] *= 1.2
    processes[1]["rounds"][0]["efficiency"] = 2.0
    fields = [field for field, _ in raw_disagreements(artifact)]
    assert fields == ["backends.mujoco.processes[1].rounds[0].efficiency", "backends.mujoco.summary"]


def test_a_phase_timing_needs_enough_samples_and_gets_a_family_wide_interval() -> None:
    from soakbench.harness.probe.two_probes import (
        MIN_PHASE_ITERS,
        MIN_PROCESSES,
        PHASE_CONFIDENCE,
        measure_row,
    )

    base, slow = _groups(1.0, 0.01, 1, size=10), _groups(1.5, 0.01, 2, size=10)
    few = measure_row("mujoco", "physics_exchange_ms", (base, slow), 0.05, False)
    assert few is not None and few["verdict"] == "inconclusive" and "phase timing" in few["note"]
    assert few["confidence"] == PHASE_CONFIDENCE > 0.99
    rate = measure_row("mujoco", "env_control_steps_per_s", (base, slow), 0.05, True)
    assert MIN_PROCESSES == 3
    assert rate is not None and rate["verdict"] == "faster" and rate["confidence"] == 0.95
    base, slow = _groups(1.0, 0.01, 1, size=MIN_PHASE_ITERS), _groups(1.5, 0.01, 2, size=MIN_PHASE_ITERS)
    enough = measure_row("mujoco", "physics_exchange_ms", (base, slow), 0.05, False)
    assert enough is not None and enough["verdict"] == "slower"
    wide = ratio_interval(base, slow, confidence=PHASE_CONFIDENCE)
    narrow = ratio_interval(base, slow)
    assert wide.low <= narrow.low and narrow.high <= wide.high


def test_a_call_under_a_different_host_load_is_not_made() -> None:
    from soakbench.harness.probe.two_probes import CONTENTION_BOUND, load_note, measure_row

    assert load_note(0.10, 0.10 + CONTENTION_BOUND) is None and load_note(None, 0.9) is None
    note = load_note(0.10, 0.60)
    assert note is not None and "60%" in note
    base, slow = _groups(100.0, 0.01, 1), _groups(50.0, 0.01, 2)
    called = measure_row("mujoco", "env_control_steps_per_s", (base, slow), 0.05, True)
    held = measure_row("mujoco", "env_control_steps_per_s", (base, slow), 0.05, True, note)
    assert called is not None and called["verdict"] == "slower"
    assert held is not None and held["verdict"] == "inconclusive" and held["note"].startswith(note)
    assert "rounds per process" in held["note"]
    same = measure_row("mujoco", "env_control_steps_per_s", (base, _groups(100.0, 0.01, 3)), 0.05, True, note)
    assert same is not None and same["verdict"] == "no_change" and same["note"] is None


def test_no_measure_is_called_from_fewer_than_three_processes_a_side() -> None:
    """Two processes' medians estimate no noise floor: even a 50 % change is held back, and said why."""
    from soakbench.harness.probe.two_probes import measure_row

    for groups in (1, 2):
        base, slow = _groups(100.0, 0.01, 1, groups=groups), _groups(50.0, 0.01, 2, groups=groups)
        for measure, higher in (
            ("env_control_steps_per_s", True),
            ("efficiency", True),
            ("iteration_ms", False),
        ):
            row = measure_row("mujoco", measure, (base, slow), 0.05, higher)
            assert row is not None and row["verdict"] == "inconclusive", (groups, measure)
            assert f"(now {groups}" in row["note"] and "3 processes" in row["note"]
    mixed = measure_row(
        "mujoco", "efficiency", (_groups(100.0, 0.01, 1), _groups(50.0, 0.01, 2, groups=2)), 0.05, True
    )
    assert mixed is not None and mixed["verdict"] == "inconclusive" and "(now 2)" in mixed["note"]
