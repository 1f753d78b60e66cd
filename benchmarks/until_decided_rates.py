"""False-alarm and detection figures of ``--until-decided`` (harness.soak.verdicts.looks), beside the
naive rule it replaces: stop at the first 95 % decision, checked over and over.

The series are those of benchmarks/survival_rates.py: the tree's PSS and each long-lived process's fds of
the real filed soak streams (the first ``--seconds`` after start-up), each also block-bootstrapped
``--resamples`` times, under the same example host (8 GiB of memory headroom, a soft RLIMIT_NOFILE of
1024, a 72 h target). Each series is watched as a soak would be, two ways:

- **looks**: the product's rule. Look k at an analysed span of ``first_look_s · 2^(k−1)`` (24 sample
  intervals first), bounds at one-sided ``1 − 0.05 / (k (k+1))``; stop at the first look that decides;
  else one last look at the end;
- **naive**: the verdict at one-sided 95 % after every ``--naive-every`` samples from the same first look
  on; stop at the first decision.

For the healthy series, a ``fails`` is a false alarm. Leaks at 0.5×, 0.8×, 1.25× and 2× the lethal rate
(headroom ÷ target) are added to every series: below 1× a ``fails`` is wrong (a false alarm), above 1× a
``survives`` is (a missed death); at 2× ``fails`` is a detection.
Also reported: the median share of the window a decided run stopped at (how much soak the rule saves).

Not a test: the figures are printed (and written with ``--json``).

    uv run --frozen python benchmarks/until_decided_rates.py [FILES...] [--resamples 10] [--json OUT]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its sibling benchmark

from json_output import JsonOut
from survival_rates import EVIDENCE, GIB, Healthy, _lethal, healthy_pool, leaked, print_report, verdict

from soakbench.harness.soak.verdicts.looks import (
    FIRST_LOOK_SAMPLES,
    LOOK_RATIO,
    look_alpha,
)
from soakbench.harness.soak.verdicts.projection import CONFIDENCE

#: multiples of the lethal rate added to each series: below 1 a ``fails`` is wrong, above 1 a ``survives``
MULTIPLES = (0.0, 0.5, 0.8, 1.25, 2.0)


def _verdict(series: Healthy, x: np.ndarray, end: int, confidence: float, limits: dict[str, float]) -> str:
    """The class verdict over the first ``end`` samples of ``(series.t, x)``."""
    return verdict(series, x, limits, end=end, confidence=confidence)


def _look_points(t: np.ndarray, first_s: float) -> Iterator[tuple[int, int]]:
    """(look index, samples up to the look) of the product's schedule over times ``t``."""
    index, span = 1, t - t[0]
    while True:
        due = np.nonzero(span >= first_s * LOOK_RATIO ** (index - 1))[0]
        if not due.size:
            return
        yield index, int(due[0]) + 1
        index += 1


def watch_with_looks(series: Healthy, x: np.ndarray, limits: dict[str, float]) -> tuple[str, float]:
    """The product's rule: the standing verdict and the share of the window at which it stood."""
    step = float(np.median(np.diff(series.t)))
    index = 0
    for index, end in _look_points(series.t, FIRST_LOOK_SAMPLES * step):
        verdict = _verdict(series, x, end, 1.0 - look_alpha(index), limits)
        if verdict in ("survives", "fails"):
            return verdict, end / series.t.size
    last = _verdict(series, x, series.t.size, 1.0 - look_alpha(index + 1), limits)
    return last, 1.0


def watch_naively(series: Healthy, x: np.ndarray, limits: dict[str, float], every: int) -> tuple[str, float]:
    """A fixed 95 % verdict after every ``every`` samples from the first look on; the first decision."""
    verdict = "inconclusive"
    for end in range(FIRST_LOOK_SAMPLES, series.t.size + 1, every):
        verdict = _verdict(series, x, end, CONFIDENCE, limits)
        if verdict in ("survives", "fails"):
            return verdict, end / series.t.size
    return verdict, 1.0


def _rates(outcomes: list[tuple[str, float]], multiple: float) -> dict[str, Any]:
    decided = [share for verdict, share in outcomes if verdict in ("survives", "fails")]
    wrong = "fails" if multiple < 1.0 else "survives"
    return {
        "wrong": sum(v == wrong for v, _ in outcomes) / len(outcomes),
        "fails": sum(v == "fails" for v, _ in outcomes) / len(outcomes),
        "survives": sum(v == "survives" for v, _ in outcomes) / len(outcomes),
        "median_stop_share_when_decided": float(np.median(decided)) if decided else None,
    }


def main(  # noqa: PLR0913 — typer declares one parameter per CLI option
    files: Annotated[
        list[Path] | None, typer.Argument(help="samples files (default: the filed soaks)")
    ] = None,
    seconds: Annotated[float, typer.Option(help="post-start-up seconds of each stream")] = 600.0,
    resamples: Annotated[int, typer.Option(help="block-bootstrap resamples per series")] = 10,
    block: Annotated[int, typer.Option(help="bootstrap block length, in samples")] = 12,
    naive_every: Annotated[int, typer.Option(help="samples between the naive rule's checks")] = 4,
    target_hours: Annotated[float, typer.Option(help="--must-survive, in hours")] = 72.0,
    seed: Annotated[int, typer.Option()] = 0,
    json_out: JsonOut = None,
) -> None:
    rng = np.random.default_rng(seed)
    paths = files or sorted(EVIDENCE.glob("*.samples.jsonl"))
    limits = {"target_h": target_hours, "memory_headroom": 8.0 * GIB, "fd_limit": 1024.0}
    pool = healthy_pool(paths, seconds=seconds, resamples=resamples, block=block, rng=rng)
    report: dict[str, Any] = {
        "files": [p.name for p in paths],
        "seconds": seconds,
        "resamples": resamples,
        "naive_every": naive_every,
        **limits,
    }
    for name in ("pss", "fds"):
        mine = [(s, x) for s, x in pool if s.name == name]
        rows: dict[str, Any] = {"series": len(mine)}
        for multiple in MULTIPLES:
            looks, naive = [], []
            for s, x in mine:
                with_leak = leaked(s, x, multiple * _lethal(s, **limits))
                looks.append(watch_with_looks(s, with_leak, limits))
                naive.append(watch_naively(s, with_leak, limits, naive_every))
            rows[f"{multiple:g}x_lethal"] = {
                "looks": _rates(looks, multiple),
                "naive": _rates(naive, multiple),
            }
        report[name] = rows
    print_report(report, json_out)


if __name__ == "__main__":
    typer.run(main)
