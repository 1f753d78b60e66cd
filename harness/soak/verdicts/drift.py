"""Throughput drift: did the trainer's ``env_steps_per_s`` fall over the trend window of one soak?

Pure logic over the monitor's samples; numpy only. The series is ``progress.env_steps_per_s`` of the
samples (each sample carries the trainer's last progress record), over the same window as the leak
verdicts (``harness.soak.verdicts.trends.analysis_span``: after start-up, before the finalize phase and the
teardown tail, the later two thirds). A progress record seen by several samples counts once, at the
first sample that saw it, so a trainer that writes progress less often than the monitor samples does not
repeat values (repeats would be ties that shrink the Mann–Kendall variance). Only records of the
``train`` phase count (or records without a phase, from an arbitrary command): prefill collects without
learner updates, so its higher pace falling to the training pace is not a drift.

The verdict is ``declining`` only if both hold, otherwise ``stable``:

1. **Trend** — one-sided (downward) Mann–Kendall test, ``p < alpha`` (0.01).
2. **Size** — the Theil–Sen line falls by at least ``min_relative_decline`` (10 %) of its level at the
   window's start over the window (``slope * span / level(t_start)``).

``insufficient_data`` when fewer than ``min_points`` distinct progress records with a throughput lie in
the window (a command that writes no progress records has none), or the fitted start level is not
positive. A decline is information by default: a curriculum may slow a run on purpose. Only with
``--fail-on-throughput-drift`` is it a row of the pass table (harness.soak.verdicts.evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from soakbench.harness.soak.verdicts.trends import (
    METHOD,
    analysis_span,
    block_medians,
    mann_kendall,
    theil_sen_slope,
)

DriftVerdict = Literal["stable", "declining", "insufficient_data"]
DRIFT_VERDICTS: tuple[str, ...] = ("stable", "declining", "insufficient_data")


@dataclass(frozen=True)
class DriftConfig:
    """Thresholds of the drift verdict (documented in the module docstring, recorded in the artifact)."""

    alpha: float = 0.01
    min_relative_decline: float = 0.10
    min_points: int = 8
    max_points: int = 1500


DEFAULT_DRIFT = DriftConfig()


def _rate(progress: Any) -> float | None:
    if not isinstance(progress, Mapping) or progress.get("phase", "train") != "train":
        return None  # prefill runs without learner updates: another workload, faster by design
    value = progress.get("env_steps_per_s")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def throughput_series(
    samples: Sequence[Mapping[str, Any]], t_start: float, t_end: float
) -> tuple[np.ndarray, np.ndarray]:
    """Times [n] and env steps/s [n] of the distinct progress records first seen in [t_start, t_end]."""
    times: list[float] = []
    values: list[float] = []
    previous: Any = None
    for sample in samples:
        progress = sample.get("progress")
        if progress == previous:
            continue
        previous = progress
        t = float(sample["t"])
        rate = _rate(progress)
        if rate is not None and t_start <= t <= t_end:
            times.append(t)
            values.append(rate)
    return np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64)


def classify_throughput(
    t: np.ndarray, values: np.ndarray, config: DriftConfig = DEFAULT_DRIFT
) -> tuple[DriftVerdict, dict[str, Any]]:
    """Verdict for one windowed throughput series (the two tests of the module docstring).

    Args:
        t: [n] sample times in seconds, non-decreasing.
        values: [n] env steps/s.

    Returns:
        (verdict, details): slope (env steps/s per hour), one-sided p-value, relative change (%) and a
        ``reason`` sentence.
    """
    tt, x = block_medians(t, values, config.max_points)
    details: dict[str, Any] = {"points": int(x.size)}
    if x.size < config.min_points:
        details["reason"] = (
            f"{x.size} progress records with env_steps_per_s in the trend window, fewer than the "
            f"{config.min_points} needed"
        )
        return "insufficient_data", details
    slope = theil_sen_slope(tt, x)
    intercept = float(np.median(x - slope * tt))
    start_level = intercept + slope * float(tt[0])
    mk = mann_kendall(x)
    p_down = 0.5 * math.erfc(-mk["z"] / math.sqrt(2.0))
    details.update(
        {"slope_per_hour": slope * 3600.0, "p_value": p_down, "start_level": start_level, "tau": mk["tau"]}
    )
    if start_level <= 0.0:
        details["reason"] = f"the fitted throughput at the window's start is {start_level:.6g}, not positive"
        return "insufficient_data", details
    change = slope * float(tt[-1] - tt[0]) / start_level
    details["relative_change_pct"] = 100.0 * change
    declining = p_down < config.alpha and change <= -config.min_relative_decline
    details["reason"] = (
        f"env steps/s {100.0 * change:+.1f} % over the window (Theil–Sen), Mann–Kendall p={p_down:.3g}; "
        + (
            "a significant decline"
            if declining
            else f"declining needs p < {config.alpha} and <= -{100.0 * config.min_relative_decline:g} %"
        )
    )
    return ("declining" if declining else "stable"), details


def throughput_drift(
    samples: Sequence[Mapping[str, Any]],
    startup_end_t: float | None,
    config: DriftConfig = DEFAULT_DRIFT,
) -> dict[str, Any]:
    """The ``throughput_drift`` record of the artifact (docs/soak-artifact.md).

    Args:
        samples: monitor samples in time order, each with ``t`` and ``progress`` (a record or null).
        startup_end_t: when start-up ended (first progress); None gives ``insufficient_data``.

    Returns:
        ``{verdict, method, reason, points, slope_per_hour, p_value, relative_change_pct, window {t_start,
        t_end}, thresholds}``; the statistics are null when there was too little data to compute them.
    """
    record: dict[str, Any] = {
        "verdict": "insufficient_data",
        "method": METHOD,
        "points": 0,
        "slope_per_hour": None,
        "p_value": None,
        "relative_change_pct": None,
        "window": {"t_start": None, "t_end": None},
        "thresholds": {
            "alpha": config.alpha,
            "min_relative_decline": config.min_relative_decline,
            "min_points": config.min_points,
        },
    }
    span = analysis_span(samples, startup_end_t) if startup_end_t is not None and samples else None
    if span is None:
        record["reason"] = "no post-start-up samples (start-up never ended or nothing was sampled)"
        return record
    record["window"] = {"t_start": span["t_start"], "t_end": span["t_end"]}
    verdict, details = classify_throughput(
        *throughput_series(samples, span["t_start"], span["t_end"]), config
    )
    record.update({k: v for k, v in details.items() if k in record or k == "reason"})
    record["verdict"] = verdict
    return record
