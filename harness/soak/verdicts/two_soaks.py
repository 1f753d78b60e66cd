"""``soak compare BASE NEW``: verdicts per measure between two soaks of one workload. Pure: artifacts and
their samples in, the report (schema ``soak-compare-2``) out.

Every measure is recomputed from the samples files, never read from the stored summaries:

- ``env_steps_per_s``: the trainer's progress-record throughput over the trend window
  (``harness.soak.verdicts.drift.throughput_series`` over ``harness.soak.verdicts.trends.analysis_span``). The window's
  series is cut into ``THROUGHPUT_BLOCKS`` consecutive time blocks that act as the groups of
  ``harness.two_runs.stats``' two-level bootstrap (a block bootstrap: neighbouring records are correlated,
  blocks much less so), and the spread between block medians is the noise floor.
- ``peak.<class>``: the maximum of the class's ``totals`` field over all samples. One number per run, so
  no interval: a difference beyond ``max(threshold x base, the class's absolute floor)`` (the leak
  verdict's floor: 1 process, 64 MiB, 3 fds) is called, anything smaller is ``no_change``.
- ``slope.<class>``: the Theil–Sen slope over the trend window with Sen's rank interval, and the run's
  state: ``rising`` (one-sided Mann–Kendall p < alpha and growth over the window >= the floor) or
  ``flat``. A class that turned from flat to rising is ``slower`` and named, even when both runs passed.
- ``duration_s``: the monitor's duration, one number per run, judged against the threshold and the
  throughput's noise floor; without a throughput series it is not called.
- ``survival.<class>``: each soak's survival verdict, re-derived from its samples by the one judgement
  (``judgement.survival_of``) against one target for both (``--must-survive``, else the new soak's,
  else the base's; none: no survival rows): per class the worst verdict over its scopes (the tree, each
  process) and the shortest lower bound on its time to exhaustion, in hours. A class that ``fails`` in
  the new soak only is ``slower`` and named; one that no longer fails is ``faster``; the horizons are
  shown, not judged (two soaks of one trainer have given lower bounds a factor of two apart).

For a resource (peak, slope) or the duration lower is better, so ``slower`` reads "worse" and
``faster`` "better". See docs/soak-reference.md, "``soak compare``".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

import numpy as np

from soakbench.harness.soak.verdicts.drift import throughput_series
from soakbench.harness.soak.verdicts.judgement import facts_from_artifact, gates_from_artifact, survival_of
from soakbench.harness.soak.verdicts.survival import Survival, duration_text
from soakbench.harness.soak.verdicts.trends import (
    DEFAULT_CONFIG,
    RESOURCE_CLASSES,
    analysis_span,
    block_medians,
    mann_kendall,
    theil_sen_slope,
)
from soakbench.harness.two_runs.fields import dig
from soakbench.harness.two_runs.stats import Verdict, noise_floor, ratio_interval, verdict

REPORT_SCHEMA_VERSION = 2
REPORT_SCHEMA = f"soak-compare-{REPORT_SCHEMA_VERSION}.schema.json"
DEFAULT_THRESHOLD = 0.05
THROUGHPUT_BLOCKS = 5
MIN_BLOCK_POINTS = 2
# Pairwise slopes are O(n^2): the window is reduced to this many block medians first.
SLOPE_POINTS = 400
SLOPE_CONFIDENCE = 0.95
METHOD = (
    "env_steps_per_s: block bootstrap (5 consecutive time blocks, then records) of the ratio of medians; "
    "slopes: Theil-Sen with Sen's rank interval; peaks and duration: one value per run against the threshold; "
    "survival: each soak's class verdicts re-derived against one target, a new fails is a regression"
)
#: how bad a class's survival verdict is; a class's row takes the worst over its scopes, and a verdict
#: outside this scale (not_observable, insufficient_data) is not judged against the target
SURVIVAL_SEVERITY: dict[str, int] = {"survives": 0, "inconclusive": 1, "fails": 2}
# Settings that define the workload: a comparison across them compares different things.
WORKLOAD_FIELDS: tuple[str, ...] = (
    "run_settings.algo",
    "run_settings.task",
    "run_settings.sim",
    "run_settings.num_envs",
    "command",
)
# Settings and facts that may differ; each difference is listed beside the verdicts.
LISTED_FIELDS: tuple[str, ...] = (
    "mode",
    "status",
    "run_settings.iterations",
    "run_settings.extra_overrides",
    "timing.sample_interval_s",
    "timing.min_duration_s",
    "timing.startup_timeout_s",
    "timing.stale_progress_s",
    "context.source.commit",
    "context.source.dirty",
)


class SoakCompareError(Exception):
    """The two soaks cannot be compared: exit 2; ``field`` names why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def workload_command(artifact: Mapping[str, Any]) -> list[str]:
    """The command with what legitimately differs between two runs of one workload made neutral: the
    run's own log directory and the interpreter's location (each worktree has its own)."""
    command = [str(arg) for arg in artifact["command"]]
    log_dir = str(artifact["log_dir"])
    neutral = [arg.replace(log_dir, "<log_dir>") if log_dir else arg for arg in command]
    if neutral:
        neutral[0] = PurePath(neutral[0]).name
    return neutral


def workload_refusal(base: Mapping[str, Any], new: Mapping[str, Any]) -> SoakCompareError | None:
    """The first workload field on which the soaks differ, as the error to raise (None: same)."""
    for field in WORKLOAD_FIELDS:
        if field == "command":
            old, now = workload_command(base), workload_command(new)
        else:
            old, now = dig(base, field), dig(new, field)
        if old != now:
            return SoakCompareError(
                field, f"base {old!r} vs new {now!r}: a different workload is not compared"
            )
    return None


def _row(measure: str, kind: str, unit: str, values: tuple[float | None, float | None]) -> dict[str, Any]:
    base, new = values
    ratio = new / base if base and new is not None and base > 0 else None
    return {
        "measure": measure,
        "kind": kind,
        "unit": unit,
        "higher_is_better": kind == "throughput",
        "base": base,
        "new": new,
        "ratio": ratio,
        "ci_low": None,
        "ci_high": None,
        "noise_floor": None,
        "base_state": None,
        "new_state": None,
        "base_interval": None,
        "new_interval": None,
        "verdict": "inconclusive",
        "note": None,
    }


def throughput_groups(samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> list[list[float]]:
    """The window's env steps/s in ``THROUGHPUT_BLOCKS`` consecutive blocks ([] when too few records)."""
    span = analysis_span(samples, startup_end_t) if startup_end_t is not None and samples else None
    if span is None:
        return []
    _, values = throughput_series(samples, span["t_start"], span["t_end"])
    if values.size < THROUGHPUT_BLOCKS * MIN_BLOCK_POINTS:
        return []
    return [[float(v) for v in block] for block in np.array_split(values, THROUGHPUT_BLOCKS)]


def throughput_row(groups: tuple[list[list[float]], list[list[float]]], threshold: float) -> dict[str, Any]:
    """The env steps/s verdict from the two runs' blocked window series."""
    base, new = groups
    row = _row("env_steps_per_s", "throughput", "env steps/s", (_median(base), _median(new)))
    if not base or not new:
        row["note"] = (
            f"fewer than {THROUGHPUT_BLOCKS * MIN_BLOCK_POINTS} progress records with env_steps_per_s in "
            "a trend window (the command writes none, or the run was too short)"
        )
        return row
    interval = ratio_interval(base, new, seed=0)
    floor = noise_floor(base, new)
    row.update(
        ratio=interval.ratio,
        ci_low=interval.low,
        ci_high=interval.high,
        noise_floor=floor,
        verdict=verdict(interval, threshold, higher_is_better=True, noise_floor=floor),
    )
    if floor > threshold:
        row["note"] = f"the runs' throughput wanders so much that a change under {floor:.0%} is not called"
    return row


def _median(groups: list[list[float]]) -> float | None:
    flat = [v for g in groups for v in g]
    return float(statistics.median(flat)) if flat else None


def peak(samples: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """The maximum of ``totals[key]`` over the samples (None when it was never observed)."""
    values = [s["totals"].get(key) for s in samples]
    present = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(present) if present else None


def peak_row(cls: str, values: tuple[float | None, float | None], threshold: float) -> dict[str, Any]:
    """A class's peak verdict: beyond ``max(threshold x base, floor)`` is called, less is no_change."""
    key, unit = RESOURCE_CLASSES[cls]
    row = _row(f"peak.{cls}", "peak", unit, values)
    base, new = values
    if base is None or new is None:
        row["note"] = f"totals.{key} was not observed in {'base' if base is None else 'new'}"
        return row
    effect = max(threshold * base, float(DEFAULT_CONFIG.min_absolute_growth[cls]))
    row["verdict"] = "slower" if new - base > effect else "faster" if base - new > effect else "no_change"
    return row


def window_series(samples: Sequence[Mapping[str, Any]], key: str, span: Mapping[str, Any]) -> np.ndarray:
    """[2, n] times and values of ``totals[key]`` inside the trend window (nulls dropped)."""
    pairs = [
        (float(s["t"]), float(s["totals"][key]))
        for s in samples
        if span["t_start"] <= float(s["t"]) <= span["t_end"]
        and isinstance(s["totals"].get(key), int | float)
        and not isinstance(s["totals"].get(key), bool)
    ]
    return np.asarray(pairs, dtype=np.float64).reshape(-1, 2).T


def slope_fit(t: np.ndarray, x: np.ndarray, floor: float) -> dict[str, Any] | None:
    """Theil–Sen slope per hour with Sen's rank interval and the state rising|flat (None: too few)."""
    if x.size < DEFAULT_CONFIG.min_samples:
        return None
    tt, xx = block_medians(t, x, SLOPE_POINTS)
    i, j = np.triu_indices(tt.size, k=1)
    keep = tt[j] > tt[i]
    slopes = np.sort((xx[j][keep] - xx[i][keep]) / (tt[j][keep] - tt[i][keep]))
    mk = mann_kendall(xx)
    z = statistics.NormalDist().inv_cdf(0.5 + SLOPE_CONFIDENCE / 2.0)
    reach = z * math.sqrt(max(mk["var_s"], 0.0))
    low_rank = max(0, math.floor((slopes.size - reach) / 2.0))
    high_rank = min(slopes.size - 1, math.ceil((slopes.size + reach) / 2.0))
    slope = theil_sen_slope(tt, xx)
    span = float(tt[-1] - tt[0])
    rising = mk["p_value_increasing"] < DEFAULT_CONFIG.alpha and slope * span >= floor
    return {
        "per_hour": slope * 3600.0,
        "interval": [float(slopes[low_rank]) * 3600.0, float(slopes[high_rank]) * 3600.0],
        "span_s": span,
        "state": "rising" if rising else "flat",
    }


def slope_row(cls: str, fits: tuple[dict[str, Any] | None, dict[str, Any] | None]) -> dict[str, Any]:
    """A class's slope verdict from the two runs' fits (the rule of the module docstring)."""
    _key, unit = RESOURCE_CLASSES[cls]
    old, now = fits
    per_hour = tuple(None if fit is None else float(fit["per_hour"]) for fit in fits)
    row = _row(f"slope.{cls}", "slope", f"{unit}/h", (per_hour[0], per_hour[1]))
    row["ratio"] = None  # a ratio of slopes near zero means nothing; the states and intervals do
    if old is None or now is None:
        row["note"] = f"fewer than {DEFAULT_CONFIG.min_samples} values of the class in a trend window"
        return row
    row.update(
        base_state=old["state"], new_state=now["state"],
        base_interval=old["interval"], new_interval=now["interval"],
    )  # fmt: skip
    row["verdict"], row["note"] = _slope_verdict(cls, old, now)
    return row


def _slope_verdict(cls: str, old: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[Verdict, str | None]:
    if old["state"] == "flat" and now["state"] == "rising":
        return "slower", f"{cls} turned from flat to rising ({now['per_hour']:+.4g}/h)"
    if old["state"] == "rising" and now["state"] == "flat":
        return "faster", f"{cls} stopped rising (was {old['per_hour']:+.4g}/h)"
    if old["state"] == "rising":  # both rising: called only when the intervals separate
        if now["interval"][0] > old["interval"][1]:
            return "slower", f"{cls} rises faster than before"
        if now["interval"][1] < old["interval"][0]:
            return "faster", f"{cls} rises slower than before"
        return "inconclusive", f"{cls} rises in both runs at rates the intervals do not separate"
    floor = float(DEFAULT_CONFIG.min_absolute_growth[cls])
    ruled_out = all(fit["interval"][1] / 3600.0 * fit["span_s"] < floor for fit in (old, now))
    if ruled_out:
        return "no_change", None
    return "inconclusive", f"flat in both, but the intervals allow growth of the {floor:g} floor"


def duration_row(values: tuple[float, float], threshold: float, floor: float | None) -> dict[str, Any]:
    """The monitor's duration against ``max(threshold, throughput noise floor)``. Without a throughput
    series there is no estimate of its noise (start-up and teardown jitter alone move a short run by
    several percent), so nothing is called."""
    row = _row("duration_s", "duration", "s", values)
    base, new = values
    if base <= 0 or new <= 0:
        row["note"] = "a duration of 0 s has no ratio"
        return row
    ratio = new / base
    effect = max(threshold, floor or 0.0)
    if floor is None:
        row["note"] = "one number per run and no throughput series to size its noise: not called"
    elif ratio > 1.0 + effect:
        row["verdict"] = "slower"
    elif ratio < 1.0 / (1.0 + effect):
        row["verdict"] = "faster"
    elif floor <= threshold:
        row["verdict"] = "no_change"
    return row


@dataclass(frozen=True)
class ClassOutcome:
    """One class's survival in one soak: the worst ``verdict`` over its scopes (``SURVIVAL_SEVERITY``)
    and the shortest lower bound on its time to exhaustion (``hours``; None: none runs out)."""

    verdict: str
    hours: float | None


def _severity(verdict: str) -> int:
    return SURVIVAL_SEVERITY.get(verdict, -1)


def class_outcomes(survival: Survival) -> dict[str, ClassOutcome]:
    """Each projected class of one soak's survival, its scopes folded into one outcome."""
    grouped: dict[str, list[tuple[str, float | None]]] = {}
    for entry in survival.classes:
        grouped.setdefault(entry.resource_class, []).append((entry.verdict, entry.hours_to_exhaustion_lower))
    outcomes = {}
    for name, entries in grouped.items():
        hours = [h for _, h in entries if h is not None]
        worst = max((v for v, _ in entries), key=_severity)
        outcomes[name] = ClassOutcome(verdict=worst, hours=min(hours) if hours else None)
    return outcomes


def survival_target(runs: tuple[Mapping[str, Any], Mapping[str, Any]], asked_s: float | None) -> float | None:
    """The one target both soaks are judged against: ``asked_s`` (``--must-survive``), else the new
    soak's, else the base's (None: neither declared one)."""
    if asked_s is not None:
        return asked_s
    for run in (runs[1], runs[0]):
        declared = dig(run, "survival.target_seconds")
        if isinstance(declared, int | float) and not isinstance(declared, bool):
            return float(declared)
    return None


def judged_survival(
    run: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], target_s: float
) -> Survival:
    """One soak's survival re-derived from its samples, under the gates it recorded but ``target_s``."""
    gates = replace(gates_from_artifact(run), must_survive_s=target_s)
    return survival_of(samples, facts=facts_from_artifact(run), gates=gates)


def survival_row(
    name: str, outcomes: tuple[ClassOutcome | None, ClassOutcome | None], target_s: float
) -> dict[str, Any]:
    """A class's survival verdict between the soaks (the rule of the module docstring)."""
    old, now = outcomes
    row = _row(
        f"survival.{name}",
        "survival",
        "h",
        (None if old is None else old.hours, None if now is None else now.hours),
    )
    if old is None or now is None:
        row["note"] = f"{name} is projected in the {'new' if old is None else 'base'} soak only"
        return row
    row.update(base_state=old.verdict, new_state=now.verdict)
    target = duration_text(target_s / 3600.0)
    if min(_severity(old.verdict), _severity(now.verdict)) < 0:
        row["note"] = f"{name}: {old.verdict} -> {now.verdict}: not judged against the {target} target"
    elif now.verdict == old.verdict:
        row["verdict"] = "no_change"
    elif now.verdict == "fails":
        lasts = "" if now.hours is None else f"; exhausted no sooner than {duration_text(now.hours)}"
        row["verdict"], row["note"] = "slower", f"{name} now fails the {target} target{lasts}"
    elif old.verdict == "fails":
        row["verdict"], row["note"] = "faster", f"{name} no longer fails the {target} target"
    else:
        row["note"] = (
            f"{name}: one soak vouches for {target} and the other cannot decide it; a longer soak decides"
        )
    return row


def survival_rows(
    runs: tuple[Mapping[str, Any], Mapping[str, Any]],
    samples: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    target_s: float,
) -> list[dict[str, Any]]:
    """One row per class projected in either soak, both judged against ``target_s``, in class order."""
    base, new = (
        class_outcomes(judged_survival(run, side, target_s)) for run, side in zip(runs, samples, strict=True)
    )
    return [
        survival_row(name, (base.get(name), new.get(name)), target_s)
        for name in sorted(base.keys() | new.keys())
    ]


def compare_runs(
    runs: tuple[Mapping[str, Any], Mapping[str, Any]],
    samples: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    threshold: float,
    *,
    target_s: float | None = None,
) -> list[dict[str, Any]]:
    """Every measure's row, in table order: throughput, duration, per class its peak and slope, then
    (with a survival target) per projected class its survival."""
    startups = tuple(dig(run, "resource_summary.startup_end_t") for run in runs)
    blocks = (throughput_groups(samples[0], startups[0]), throughput_groups(samples[1], startups[1]))
    rows = [throughput_row(blocks, threshold)]
    durations = (float(runs[0]["timing"]["duration_s"]), float(runs[1]["timing"]["duration_s"]))
    rows.append(duration_row(durations, threshold, rows[0]["noise_floor"]))
    spans = tuple(
        analysis_span(side, start) if start is not None and side else None
        for side, start in zip(samples, startups, strict=True)
    )
    for cls, (key, _unit) in RESOURCE_CLASSES.items():
        rows.append(peak_row(cls, (peak(samples[0], key), peak(samples[1], key)), threshold))
        floor = float(DEFAULT_CONFIG.min_absolute_growth[cls])
        fits = tuple(
            None if span is None else slope_fit(*_pair(window_series(side, key, span)), floor)
            for side, span in zip(samples, spans, strict=True)
        )
        rows.append(slope_row(cls, (fits[0], fits[1])))
    if target_s is not None:
        rows += survival_rows(runs, samples, target_s)
    return rows


def _pair(series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return series[0], series[1]
