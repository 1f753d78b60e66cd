"""False-alarm, detection and sensitivity figures of the survival verdict (harness.soak.verdicts.survival).

Healthy series come from real soak sample streams (``matrix/evidence/soak/*.samples.jsonl`` by default,
or the files given): for each, the tree's PSS and every long-lived process's fd total over the
post-start-up window, cut to ``--seconds`` from the start of that window. Each is judged as it is, and
``--resamples`` more times after a moving-block bootstrap of its levels (blocks of ``--block`` samples,
drawn with replacement and laid end to end: the autocorrelation inside a block survives, any trend does
not). The limits are the issue's example host: ``--memory-headroom-gib`` of memory above the series'
level and a soft RLIMIT_NOFILE of ``--fd-limit``; the target is ``--target-hours``.

- **False alarms**: ``fails`` on the healthy series (the rule wants none over at least 300 per class).
- **Detection**: a linear leak at ``2×`` and ``0.5×`` the lethal rate (headroom ÷ target) added to each
  healthy series: ``fails`` in >= 95 % at 2×, in <= 5 % at 0.5×.
- **Sensitivity**: the slowest leak (as a multiple of the lethal rate, then per hour) called ``fails``
  in >= 95 % of the series, beside the floor rule's slowest ``growing`` over the same window.

``--thin-reads K`` keeps every K-th fresh PSS read and holds its level until the next kept one: the
series a sampler K times slower at reading would have recorded, to see how detection depends on the
read cadence.

Not a test: the figures are printed (and written with ``--json``).

    uv run --frozen python benchmarks/survival_rates.py [--seconds 600] [--resamples 30] [--json OUT]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from json_output import JsonOut, write_json

from soakbench.harness.soak.verdicts.exhaustion_series import ExhaustionSeries, Room, tree_reads
from soakbench.harness.soak.verdicts.projection import CONFIDENCE
from soakbench.harness.soak.verdicts.survival import project_series

EVIDENCE = Path(__file__).resolve().parents[1] / "matrix" / "evidence" / "soak"
GIB = float(1 << 30)
MIB = float(1 << 20)
MULTIPLES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


@dataclass(frozen=True)
class Healthy:
    """One healthy series: its class (``pss`` or ``fds``), where it came from, times [n], levels [n] and
    which samples read the level afresh [n] (the sampler carries PSS between reads; fds: every one)."""

    name: str
    source: str
    t: np.ndarray
    x: np.ndarray
    read: np.ndarray


def _post_startup(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    started = next((i for i, s in enumerate(samples) if s.get("progress")), None)
    return [] if started is None else samples[started:]


def healthy_series(path: Path, seconds: float) -> list[Healthy]:
    """The tree's PSS and each long-lived process's fds of one samples file, the first ``seconds`` of
    its post-start-up window."""
    samples = _post_startup([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    if len(samples) < 16:
        return []
    t0 = float(samples[0]["t"])
    window = [s for s in samples if float(s["t"]) - t0 <= seconds]
    out = []
    kept = [s for s in window if s["totals"].get("pss_bytes") is not None]
    if len(kept) >= 16:
        t = np.array([float(s["t"]) for s in kept])
        x = np.array([s["totals"]["pss_bytes"] for s in kept], float)
        read = tree_reads(kept, "pss_bytes")
        out.append(Healthy("pss", path.name, t, x, read))
    by_pid: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for sample in window:
        for proc in sample.get("processes") or ():
            key = (int(proc["pid"]), int(proc["start_ticks"]))
            by_pid.setdefault(key, []).append((float(sample["t"]), float(proc["fds"]["total"])))
    for (pid, _), points in sorted(by_pid.items()):
        if len(points) >= 0.9 * len(window):
            out.append(
                Healthy(
                    "fds",
                    f"{path.name}:{pid}",
                    np.array([p[0] for p in points]),
                    np.array([p[1] for p in points]),
                    np.ones(len(points), dtype=bool),
                )
            )
    return out


def _held_index(read: np.ndarray) -> np.ndarray:
    """For each sample, the index of the latest read at or before it (the first sample counts as one):
    what a level carried between reads repeats."""
    return np.maximum.accumulate(np.where(read, np.arange(read.size), 0))


def thinned(series: Healthy, every: int) -> Healthy:
    """``series`` as a sampler ``every`` times slower at reading would have recorded it: only every
    ``every``-th fresh read is kept (the first always), and its level is held until the next kept one.
    A series read at every sample (fds) is left as it is."""
    if every <= 1 or series.read.all():
        return series
    reads = np.flatnonzero(series.read)
    kept = np.zeros_like(series.read)
    kept[reads[::every]] = True
    kept[0] = True
    return replace(series, x=series.x[_held_index(kept)], read=kept)


def block_bootstrap(series: Healthy, block: int, rng: np.random.Generator) -> Healthy:
    """``series`` with its levels (and which were read) replaced by blocks of ``block`` consecutive
    samples drawn with replacement, as many as it had; its times stay."""
    n = series.x.size
    starts = rng.integers(0, max(1, n - block + 1), size=int(np.ceil(n / block)))
    index = np.concatenate([np.arange(s, min(n, s + block)) for s in starts])[:n]
    return replace(series, x=series.x[index], read=series.read[index])


def _room(series: Healthy, *, memory_headroom: float, fd_limit: float) -> tuple[Room, str]:
    level = float(series.x.max())
    if series.name == "pss":
        return Room(limit=level + memory_headroom, source="benchmark", headroom=memory_headroom), "bytes"
    return Room(limit=fd_limit, source="benchmark", headroom=fd_limit - level), "count"


def verdict(
    series: Healthy,
    x: np.ndarray,
    limits: Mapping[str, float],
    *,
    end: int | None = None,
    confidence: float = CONFIDENCE,
) -> str:
    """The class verdict over the first ``end`` samples of ``(series.t, x)`` (all: None), every bound at
    ``confidence``; ``limits``: the example host's ``target_h``, ``memory_headroom`` and ``fd_limit``
    (the room is taken from the whole series)."""
    target_h = limits["target_h"]
    room, unit = _room(series, memory_headroom=limits["memory_headroom"], fd_limit=limits["fd_limit"])
    t, xs = series.t[:end], x[:end]
    level = float(xs[-max(1, xs.size // 10) :].max())
    read = series.read[:end]
    projected = ExhaustionSeries(
        resource_class=series.name,
        scope="tree",
        role=None,
        unit=unit,  # type: ignore[arg-type]
        t=t,
        x=xs,
        level=level,
        room=room,
        read=read,
    )
    return project_series(
        projected, target_h=target_h, declared_cut_t=None, units_per_hour={}, confidence=confidence
    ).verdict


def healthy_pool(
    paths: list[Path],
    *,
    seconds: float,
    resamples: int,
    block: int,
    rng: np.random.Generator,
    thin_reads: int = 1,
) -> list[tuple[Healthy, np.ndarray]]:
    """Each stream's healthy series as it is (its reads ``thinned`` by ``thin_reads``), then
    ``resamples`` block-bootstrap resamples of it."""
    pool: list[tuple[Healthy, np.ndarray]] = []
    for series in (thinned(s, thin_reads) for path in paths for s in healthy_series(path, seconds)):
        pool.append((series, series.x))
        resampled = [block_bootstrap(series, block, rng) for _ in range(resamples)]
        pool += [(one, one.x) for one in resampled]
    return pool


def print_report(report: dict[str, Any], json_out: Path | None) -> None:
    """The figures on stdout, and in ``json_out`` when given."""
    text = json.dumps(report, indent=2)
    print(text)
    write_json(json_out, text)


def leaked(series: Healthy, x: np.ndarray, per_hour: float) -> np.ndarray:
    """``x`` with a linear leak of ``per_hour`` added as the sampler would have recorded it: at each
    sample that read the level afresh (``series.read``: for PSS, those that read the members holding
    most of it), held until the next read; a smooth ramp over the carried samples would be reads the
    sampler never made. An fd count is read at every sample."""
    read_at = series.t[_held_index(series.read)]
    return np.asarray(x + per_hour / 3600.0 * (read_at - series.t[0]), dtype=np.float64)


def _read_spacing(originals: list[Healthy]) -> float | None:
    """The median over ``originals`` (one series per stream, as recorded: the pool holds each before its
    resamples) of the mean seconds between fresh reads."""
    spacings = [float(np.mean(np.diff(s.t[s.read]))) for s in originals if int(s.read.sum()) >= 2]
    return float(np.median(spacings)) if spacings else None


def _lethal(series: Healthy, *, target_h: float, memory_headroom: float, fd_limit: float) -> float:
    room, _ = _room(series, memory_headroom=memory_headroom, fd_limit=fd_limit)
    return float(room.headroom or 0.0) / target_h


def main(  # noqa: PLR0913 — typer declares one parameter per CLI option
    files: Annotated[
        list[Path] | None, typer.Argument(help="samples files (default: the filed soaks)")
    ] = None,
    seconds: Annotated[float, typer.Option(help="post-start-up seconds of each stream judged")] = 600.0,
    resamples: Annotated[int, typer.Option(help="block-bootstrap resamples per series")] = 30,
    block: Annotated[int, typer.Option(help="bootstrap block length, in samples")] = 12,
    target_hours: Annotated[float, typer.Option(help="--must-survive, in hours")] = 72.0,
    memory_headroom_gib: Annotated[float, typer.Option(help="memory left above the series' level")] = 8.0,
    fd_limit: Annotated[float, typer.Option(help="each process's soft RLIMIT_NOFILE")] = 1024.0,
    seed: Annotated[int, typer.Option()] = 0,
    thin_reads: Annotated[
        int, typer.Option(min=1, help="keep every k-th fresh PSS read (a k times slower read cadence)")
    ] = 1,
    json_out: JsonOut = None,
) -> None:
    rng = np.random.default_rng(seed)
    paths = files or sorted(EVIDENCE.glob("*.samples.jsonl"))
    limits = {"target_h": target_hours, "memory_headroom": memory_headroom_gib * GIB, "fd_limit": fd_limit}
    pool = healthy_pool(
        paths, seconds=seconds, resamples=resamples, block=block, rng=rng, thin_reads=thin_reads
    )
    report: dict[str, Any] = {
        "files": [p.name for p in paths],
        "seconds": seconds,
        "thin_reads": thin_reads,
        **limits,
        "classes": {},
    }
    for name in ("pss", "fds"):
        mine = [(s, x) for s, x in pool if s.name == name]
        if not mine:
            continue
        healthy = [verdict(s, x, limits) for s, x in mine]
        rows = {}
        for multiple in MULTIPLES:
            verdicts = []
            for s, x in mine:
                verdicts.append(verdict(s, leaked(s, x, multiple * _lethal(s, **limits)), limits))
            rows[multiple] = sum(v == "fails" for v in verdicts) / len(verdicts)
        slowest = next((m for m in MULTIPLES if rows[m] >= 0.95), None)
        lethal = float(np.median([_lethal(s, **limits) for s, _ in mine]))
        span_h = float(np.median([(s.t[-1] - s.t[0]) / 3600.0 for s, _ in mine]))
        floor = 64 * MIB if name == "pss" else 3.0
        report["classes"][name] = {
            "series": len(mine),
            "from_streams": len({s.source for s, _ in mine}),
            "seconds_between_fresh_reads_median": _read_spacing(
                list({s.source: s for s, _ in reversed(mine)}.values())
            ),
            "healthy": {v: healthy.count(v) for v in sorted(set(healthy))},
            "false_alarm_rate": healthy.count("fails") / len(healthy),
            "fails_rate_by_multiple_of_lethal": rows,
            "lethal_per_hour": lethal,
            "slowest_fails_multiple": slowest,
            "slowest_fails_per_hour": None if slowest is None else slowest * lethal,
            "floor_rule_slowest_growing_per_hour": floor / (span_h * 2.0 / 3.0),
        }
    print_report(report, json_out)


if __name__ == "__main__":
    typer.run(main)
