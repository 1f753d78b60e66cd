"""The probe artifact's raw samples: summaries computed from them, the stability flag, and the check that
what an artifact states agrees with what its raw samples say. Pure: artifact dicts in, data out.

An artifact (schema 0.4.0) keeps, per backend, every worker process's raw per-round timings (the env
block's per-iteration milliseconds, the physics-limit block's steps and seconds) and the phased loop's
per-iteration milliseconds per phase. Everything derived from them (per-round rates, efficiency, the
backend summary, the stability flag) is recomputed on read by :func:`raw_disagreements`, so an edited
summary is caught instead of trusted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from soakbench.harness.probe.stats import PROBE_PHASES
from soakbench.harness.two_runs.stats import Groups, summarize

# A backend whose round-to-round (or process-to-process) coefficient of variation exceeds this is
# flagged unstable; pyperf `check` uses the same 10 % of the mean for its standard-deviation warning.
CV_BOUND = 0.10
# The first probe artifact version that keeps raw samples.
RAW_SAMPLES_VERSION = "0.4.0"
# Relative tolerance for a recomputed figure to count as equal to the stored one (float round-off).
REL_TOL = 1e-9
PHASE_SAMPLE_KEYS: tuple[str, ...] = (*(f"{p}_ms" for p in PROBE_PHASES), "iteration_ms")
RATE_MEASURES: tuple[str, ...] = ("env_control_steps_per_s", "efficiency", "physics_control_steps_per_s")


def round_rates(num_envs: int, decimation: int, raw: Mapping[str, Any]) -> dict[str, float]:
    """One round's rates from its raw timings: env control steps/s, physics steps/s, efficiency."""
    env_s = math.fsum(raw["iteration_ms"]) / 1e3
    if env_s <= 0 or raw["physics_s"] <= 0:
        raise ValueError("a round took no measurable time")
    env = num_envs * len(raw["iteration_ms"]) / env_s
    physics = raw["physics_steps"] / raw["physics_s"]
    return {
        "env_control_steps_per_s": env,
        "physics_steps_per_s": physics,
        "efficiency": env / (physics / decimation),
    }


def measure_groups(processes: Sequence[Mapping[str, Any]], measure: str) -> Groups:
    """Samples of ``measure`` grouped by process: a rate measure (one value per round) or a phase key
    of ``phase_samples_ms`` (one value per phased iteration)."""
    if measure in RATE_MEASURES:
        return [[_round_value(p, r, measure) for r in p["rounds"]] for p in processes]
    if measure in PHASE_SAMPLE_KEYS:
        return [list(p["phase_samples_ms"][measure]) for p in processes]
    raise ValueError(f"unknown probe measure {measure!r}; known: {[*RATE_MEASURES, *PHASE_SAMPLE_KEYS]}")


def _round_value(process: Mapping[str, Any], raw: Mapping[str, Any], measure: str) -> float:
    rates = round_rates(process["num_envs"], process["decimation"], raw)
    if measure == "physics_control_steps_per_s":
        return float(rates["physics_steps_per_s"] / process["decimation"])
    return float(rates[measure])


def backend_summary(processes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median, p95, mean and CV of every measure over all processes' raw samples."""
    out: dict[str, Any] = {}
    for measure in RATE_MEASURES:
        out[measure] = asdict(summarize(_flat(measure_groups(processes, measure))))
    out["phases"] = {
        key: asdict(summarize(_flat(measure_groups(processes, key)))) for key in PHASE_SAMPLE_KEYS
    }
    return out


def _flat(groups: Groups) -> list[float]:
    return [v for group in groups for v in group]


def stability(processes: Sequence[Mapping[str, Any]], cv_bound: float = CV_BOUND) -> dict[str, Any]:
    """``{unstable, cv_bound, reasons}``: round-to-round CV of env throughput and efficiency, and the CV
    of the per-process median throughput, each against ``cv_bound``."""
    reasons = []
    for measure in ("env_control_steps_per_s", "efficiency"):
        cv = summarize(_flat(measure_groups(processes, measure))).cv
        if cv > cv_bound:
            reasons.append(f"{measure} varies {cv:.1%} between rounds (bound {cv_bound:.0%})")
    medians = [statistics.median(g) for g in measure_groups(processes, "env_control_steps_per_s")]
    between = summarize(medians).cv
    if between > cv_bound:
        reasons.append(
            f"median env_control_steps_per_s varies {between:.1%} between processes (bound {cv_bound:.0%})"
        )
    return {"unstable": bool(reasons), "cv_bound": cv_bound, "reasons": reasons}


def backend_entry(processes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The artifact's ``backends.<name>``: every process's block, the summary and the stability flag."""
    return {
        "processes": [dict(p) for p in processes],
        "summary": backend_summary(processes),
        "stability": stability(processes),
    }


def _differs(stored: Any, recomputed: Any) -> bool:
    if isinstance(recomputed, Mapping):
        if not isinstance(stored, Mapping) or set(stored) != set(recomputed):
            return True
        return any(_differs(stored[k], recomputed[k]) for k in recomputed)
    if isinstance(recomputed, float) and not isinstance(stored, bool) and isinstance(stored, int | float):
        return not math.isclose(stored, recomputed, rel_tol=REL_TOL, abs_tol=1e-12)
    return bool(stored != recomputed)


def _process_disagreements(where: str, process: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    efficiencies = []
    for index, raw in enumerate(process["rounds"]):
        rates = round_rates(process["num_envs"], process["decimation"], raw)
        efficiencies.append(rates["efficiency"])
        for name, value in rates.items():
            if _differs(raw[name], value):
                out.append(
                    (f"{where}.rounds[{index}].{name}", f"states {raw[name]}, raw samples give {value}")
                )
    if _differs(process["efficiency"], statistics.median(efficiencies)):
        out.append((f"{where}.efficiency", "is not the median of its rounds' efficiencies"))
    env_ms = [ms for raw in process["rounds"] for ms in raw["iteration_ms"]]
    env = process["num_envs"] * len(env_ms) / (math.fsum(env_ms) / 1e3)
    if _differs(process["throughput_env_control_steps_per_s"], env):
        out.append((f"{where}.throughput_env_control_steps_per_s", f"states it, raw env blocks give {env}"))
    return out


def raw_disagreements(artifact: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for every stated figure of a 0.4.0 probe artifact that its raw samples do not
    reproduce: per-round rates, per-process throughput and efficiency, each backend's summary and
    stability. Empty when everything agrees. The artifact must already be schema-valid."""
    out: list[tuple[str, str]] = []
    for name, entry in sorted(artifact["backends"].items()):
        where = f"backends.{name}"
        processes = entry["processes"]
        for index, process in enumerate(processes):
            out += _process_disagreements(f"{where}.processes[{index}]", process)
        if _differs(entry["summary"], backend_summary(processes)):
            out.append((f"{where}.summary", "disagrees with the summary recomputed from the raw samples"))
        if _differs(entry["stability"], stability(processes)):
            out.append((f"{where}.stability", "disagrees with the flag recomputed from the raw samples"))
    return out


def first_raw_disagreement(artifact: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(field, message)`` of the first stated figure a schema-valid probe artifact's raw samples do not
    reproduce, or None. Artifacts before 0.4.0 carry no raw samples and have nothing to recompute."""
    if artifact.get("schema_version") != RAW_SAMPLES_VERSION:
        return None
    problems = raw_disagreements(artifact)
    return problems[0] if problems else None
