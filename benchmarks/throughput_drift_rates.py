"""False-alarm and detection rates of the throughput drift verdict (harness.soak.verdicts.drift).

- **False alarms**: the verdict on healthy real runs, read from their ``progress.jsonl`` (any trainer
  run's log dir). Each run is sampled as the monitor would, at ``--samples`` evenly spaced instants (the
  latest record at each), start-up ending at the first record. Runs longer than ``--segment-seconds``
  are also cut into segments of that length, each judged as its own soak, so one long run gives several
  healthy series.
- **Detection on real noise**: the same healthy series with a linear ``--decline`` (default 20 %) injected
  over the verdict's window.
- **Synthetic**: ``--trials`` AR(1) series (``--points`` values, coefficient ``--phi``) whose noise has the
  healthy runs' median coefficient of variation, flat (false alarms) and with the decline (detection).

    uv run --frozen python benchmarks/throughput_drift_rates.py RUN_DIR/progress.jsonl [...]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from soakbench.harness.soak.verdicts.drift import throughput_drift
from soakbench.harness.soak.verdicts.trends import analysis_span

Samples = list[dict[str, Any]]


def read_progress(path: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if isinstance(r, dict) and isinstance(r.get("elapsed_s"), int | float)]


def sampled(records: list[dict[str, Any]], count: int) -> tuple[Samples, float]:
    """Monitor-like samples (the latest record at ``count`` evenly spaced times) and the start-up end."""
    times = np.array([float(r["elapsed_s"]) for r in records])
    at = np.linspace(times[0], times[-1], count)
    index = np.searchsorted(times, at, side="right") - 1
    return [{"t": float(t), "progress": records[i]} for t, i in zip(at, index, strict=True)], float(at[0])


def segments(records: list[dict[str, Any]], seconds: float) -> list[list[dict[str, Any]]]:
    """The training part cut into ``seconds``-long pieces (none when it is shorter than two of them)."""
    train = [r for r in records if r.get("phase") == "train"]
    if not train or train[-1]["elapsed_s"] - train[0]["elapsed_s"] < 2 * seconds:
        return []
    start, pieces = float(train[0]["elapsed_s"]), list[list[dict[str, Any]]]()
    while True:
        piece = [r for r in train if start <= r["elapsed_s"] < start + seconds]
        if not piece or piece[-1]["elapsed_s"] - piece[0]["elapsed_s"] < 0.9 * seconds:
            return pieces
        pieces.append(piece)
        start += seconds


def with_decline(samples: Samples, startup: float, decline: float) -> Samples:
    """``samples`` whose throughput falls linearly by ``decline`` over the verdict's window."""
    span = analysis_span(samples, startup)
    if span is None:
        return samples
    t0, t1 = span["t_start"], span["t_end"]
    out = []
    for s in samples:
        share = min(1.0, max(0.0, (s["t"] - t0) / (t1 - t0))) if t1 > t0 else 0.0
        progress = dict(s["progress"])
        progress["env_steps_per_s"] = progress["env_steps_per_s"] * (1.0 - decline * share)
        out.append({"t": s["t"], "progress": progress})
    return out


def ar1(rng: np.random.Generator, n: int, phi: float, cv: float) -> np.ndarray:
    """Unit-mean series with AR(1) noise of coefficient of variation ``cv``."""
    e = rng.standard_normal(n) * cv * np.sqrt(1.0 - phi**2)
    x = np.empty(n)
    x[0] = rng.standard_normal() * cv
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return 1.0 + x


def synthetic(rng: np.random.Generator, n: int, phi: float, cv: float, decline: float) -> Samples:
    t = np.arange(n, dtype=float)
    ramp = 1.0 - decline * np.clip((t - n / 3.0) / (n * 0.95 - n / 3.0), 0.0, 1.0)
    rate = 20000.0 * ramp * ar1(rng, n, phi, cv)
    return [
        {"t": float(ti), "progress": {"iteration": i, "env_steps_per_s": float(r)}}
        for i, (ti, r) in enumerate(zip(t, rate, strict=True))
    ]


def _window_cv(samples: Samples, startup: float) -> float | None:
    span = analysis_span(samples, startup)
    if span is None:
        return None
    x = [s["progress"].get("env_steps_per_s") for s in samples if span["t_start"] <= s["t"] <= span["t_end"]]
    v = np.array([r for r in x if isinstance(r, int | float)], dtype=float)
    return float(v.std() / v.mean()) if v.size > 1 and v.mean() > 0 else None


def rates(series: list[tuple[Samples, float]], decline: float) -> tuple[int, int, int, float | None]:
    """(judged, false alarms, injected declines caught, median window CV) over healthy series."""
    judged = [(s, t0) for s, t0 in series if throughput_drift(s, t0)["verdict"] != "insufficient_data"]
    alarms = sum(throughput_drift(s, t0)["verdict"] == "declining" for s, t0 in judged)
    caught = sum(
        throughput_drift(with_decline(s, t0, decline), t0)["verdict"] == "declining" for s, t0 in judged
    )
    cvs = [cv for cv in (_window_cv(s, t0) for s, t0 in judged) if cv is not None]
    return len(judged), alarms, caught, float(np.median(cvs)) if cvs else None


def synthetic_rates(cv: float, decline: float, trials: int, points: int, phi: float) -> tuple[float, float]:
    """(false-alarm rate, detection rate) on flat and declining AR(1) series."""
    rng = np.random.default_rng(0)
    flat = sum(
        throughput_drift(synthetic(rng, points, phi, cv, 0.0), 0.0)["verdict"] == "declining"
        for _ in range(trials)
    )
    hit = sum(
        throughput_drift(synthetic(rng, points, phi, cv, decline), 0.0)["verdict"] == "declining"
        for _ in range(trials)
    )
    return flat / trials, hit / trials


def main(  # noqa: PLR0913 — typer declares one parameter per CLI option
    progress: Annotated[list[Path], typer.Argument(help="progress.jsonl of healthy real runs")],
    samples: Annotated[int, typer.Option("--samples", min=10)] = 200,
    segment_seconds: Annotated[float, typer.Option("--segment-seconds", min=1.0)] = 60.0,
    decline: Annotated[float, typer.Option("--decline", min=0.0, max=0.9)] = 0.20,
    trials: Annotated[int, typer.Option("--trials", min=1)] = 400,
    points: Annotated[int, typer.Option("--points", min=10)] = 200,
    phi: Annotated[float, typer.Option("--phi", min=0.0, max=0.99)] = 0.5,
) -> None:
    """Print the false-alarm and detection rates."""
    runs = [read_progress(p) for p in progress]
    groups = {
        "whole runs": [sampled(r, samples) for r in runs],
        f"{segment_seconds:g} s segments of longer runs": [
            sampled(piece, samples) for r in runs for piece in segments(r, segment_seconds)
        ],
    }
    cvs = []
    for name, series in groups.items():
        judged, alarms, caught, cv = rates(series, decline)
        cvs += [cv] if cv is not None else []
        print(f"{name}: {judged} of {len(series)} judged; false alarms {alarms}/{judged}; injected "
              f"{decline:.0%} decline detected {caught}/{judged}; median window CV {cv if cv is None else round(cv, 3)}")  # fmt: skip
    for cv in (0.05, 0.2, *cvs):
        flat, hit = synthetic_rates(cv, decline, trials, points, phi)
        print(f"synthetic AR(1) phi={phi}, cv={cv:.3f}, {points} points, {trials} trials: false alarms "
              f"{flat:.1%}, {decline:.0%} decline detected {hit:.1%}")  # fmt: skip


if __name__ == "__main__":
    typer.run(main)
