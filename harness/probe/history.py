"""Probe history: points per (task, platform, backend) and commit, and a step detector over them. Pure:
probe artifact texts in, points and steps out (git and the HTML page live in harness.probe.history_io).

A point is one backend of one probe artifact: env control steps/s and efficiency, each as the median
of the raw per-round samples with its two-level bootstrap 95 % interval (``harness.two_runs.stats``).
A 0.3.0 artifact has no raw samples: its stated figures are shown without an interval, and it takes
no part in step detection.

**Step detector.** Between each pair of consecutive commits of a series whose points both carry raw
samples, the ``probe compare`` verdict on env steps/s (ratio of medians, two-level bootstrap interval,
threshold and noise floor): a ``slower`` or ``faster`` verdict is a step, named at the later commit,
the first commit after the change. Several artifacts of one commit are pooled (their processes are
groups of one sample).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soakbench.foundation.schema import sorted_errors
from soakbench.harness.probe.samples import measure_groups, raw_disagreements
from soakbench.harness.two_runs.stats import Groups, median_interval, noise_floor, ratio_interval, verdict

KNOWN_VERSIONS = ("0.3.0", "0.4.0")
DEFAULT_THRESHOLD = 0.05
STEP_METHOD = (
    "consecutive commits: ratio of medians of env steps/s with a two-level bootstrap interval and "
    "noise floor (the probe compare verdict); slower or faster is a step"
)
_EVIDENCE_NAME = re.compile(r"^probe-(?P<platform>.+)-[a-z0-9]+_[a-z0-9_]+-[0-9a-f]{12}-[0-9a-f]{12}\.json$")


class HistoryInputError(Exception):
    """An artifact given on the command line cannot be read: exit 2; ``field`` names why."""

    def __init__(self, source: str, field: str, message: str) -> None:
        super().__init__(f"{source}: {field}: {message}")
        self.field = field


Interval = tuple[float, float | None, float | None]  # (median, low, high); no interval for 0.3.0


@dataclass
class Point:
    """One backend of one probe (or the pooled probes of one commit)."""

    task: str
    platform: str
    backend: str
    commit: str | None
    order: tuple[int, float]  # (commit's position in history, probe's creation time): the x order
    sources: list[str]
    steps_per_s: Interval
    efficiency: Interval
    groups: Groups | None = None  # raw env steps/s per process (None: a 0.3.0 artifact)
    efficiency_groups: Groups | None = None
    step: dict[str, Any] | None = field(default=None)


def platform_of(path: str) -> str:
    """The platform an evidence file name states (``probe-<platform>-<algo>_<task>_<backend>-...``)."""
    match = _EVIDENCE_NAME.match(path.rsplit("/", 1)[-1])
    return match.group("platform") if match else "given"


def parse_probe(text: str, source: str) -> dict[str, Any]:
    """A schema-valid probe artifact (0.3.0, or 0.4.0 whose summaries its raw samples reproduce)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryInputError(source, "$", f"not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "soakbench.probe":
        raise HistoryInputError(source, "kind", "not a probe artifact")
    version = doc.get("schema_version")
    if version not in KNOWN_VERSIONS:
        raise HistoryInputError(
            source, "schema_version", f"is {version!r}; known: {', '.join(KNOWN_VERSIONS)}"
        )
    errors = sorted_errors(doc, f"probe-{version}.schema.json")
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "$"
        raise HistoryInputError(source, where, f"violates probe-{version}: {errors[0].message}")
    if version != "0.3.0":
        problems = raw_disagreements(doc)
        if problems:
            raise HistoryInputError(source, problems[0][0], f"{problems[0][1]} (tampered or corrupt)")
    return doc


def points_of(doc: Mapping[str, Any], source: str, platform: str, order: tuple[int, float]) -> list[Point]:
    """One point per backend of a parsed probe artifact."""
    out = []
    for backend, entry in doc["backends"].items():
        processes = entry.get("processes")
        groups: Groups | None
        eff: Groups | None
        rate: Interval
        efficiency: Interval
        if processes:  # 0.4.0: recomputed from the raw samples
            groups = measure_groups(processes, "env_control_steps_per_s")
            eff = measure_groups(processes, "efficiency")
            rate, efficiency = median_interval(groups), median_interval(eff)
        else:
            groups = eff = None
            rate = (float(entry["throughput_env_control_steps_per_s"]), None, None)
            efficiency = (float(entry["efficiency"]), None, None)
        out.append(
            Point(
                task=doc["settings"]["task"],
                platform=platform,
                backend=backend,
                commit=doc["context"]["source"]["commit"],
                order=order,
                sources=[source],
                steps_per_s=rate,
                efficiency=efficiency,
                groups=groups,
                efficiency_groups=eff,
            )
        )
    return out


def pooled_by_commit(points: Sequence[Point]) -> list[Point]:
    """Points of one (task, platform, backend, commit) merged: processes pooled, intervals recomputed."""
    merged: dict[tuple[str, str, str, str | None], list[Point]] = {}
    for point in points:
        merged.setdefault((point.task, point.platform, point.backend, point.commit), []).append(point)
    out = []
    for same in merged.values():
        first = same[0]
        if len(same) == 1:
            out.append(first)
            continue
        raw = [p for p in same if p.groups is not None and p.efficiency_groups is not None]
        groups: Groups | None
        eff: Groups | None
        rate: Interval
        efficiency: Interval
        if raw:
            groups = [g for p in raw for g in p.groups or []]
            eff = [g for p in raw for g in p.efficiency_groups or []]
            rate, efficiency = median_interval(groups), median_interval(eff)
        else:  # only summaries: the latest probe of the commit stands
            latest = max(same, key=lambda p: p.order)
            groups = eff = None
            rate, efficiency = latest.steps_per_s, latest.efficiency
        out.append(
            Point(
                task=first.task,
                platform=first.platform,
                backend=first.backend,
                commit=first.commit,
                order=min(p.order for p in same),
                sources=[s for p in same for s in p.sources],
                steps_per_s=rate,
                efficiency=efficiency,
                groups=groups,
                efficiency_groups=eff,
            )
        )
    return out


def series(points: Sequence[Point]) -> dict[tuple[str, str, str], list[Point]]:
    """(task, platform, backend) -> its points in commit order."""
    out: dict[tuple[str, str, str], list[Point]] = {}
    for point in sorted(pooled_by_commit(points), key=lambda p: p.order):
        out.setdefault((point.task, point.platform, point.backend), []).append(point)
    return out


def detect_steps(points: Sequence[Point], threshold: float = DEFAULT_THRESHOLD) -> list[dict[str, Any]]:
    """Mark each point that is the first after a significant change of env steps/s (``point.step``);
    returns the steps ``{commit, previous, ratio, ci_low, ci_high, verdict}`` in order."""
    steps = []
    for before, after in itertools.pairwise(points):
        if before.groups is None or after.groups is None:
            continue
        interval = ratio_interval(before.groups, after.groups, seed=0)
        floor = noise_floor(before.groups, after.groups)
        call = verdict(interval, threshold, higher_is_better=True, noise_floor=floor)
        if call in ("slower", "faster"):
            after.step = {
                "commit": after.commit,
                "previous": before.commit,
                "ratio": interval.ratio,
                "ci_low": interval.low,
                "ci_high": interval.high,
                "verdict": call,
            }
            steps.append(after.step)
    return steps
