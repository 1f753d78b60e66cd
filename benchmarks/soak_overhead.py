"""Soak monitor overhead: its own CPU time as a share of one core, the time to take one sample, and the
part of it spent reading ``smaps_rollup`` (PSS/USS/swap).

Runs the real monitor (``harness.soak.loop.driver.watch``) in this process over trees of light workers
(tests/harness/soak/faults/tree.py: a parent and N-1 workers, each holding ``--worker-mib`` of touched
memory) at 1 s sampling, once per tree size, then prints the figures measured in those runs. Targets
(docs/soak-design.md, "Overhead (measured, not asserted)"): CPU share <= 2 % of one core and p95 sample
time <= 50 ms on the 10-process tree. Not a test: no thresholds are asserted, the figures are printed.

    uv run --frozen python benchmarks/soak_overhead.py [--seconds 30] [--interval 1] [--trees 10,100]
        [--worker-mib 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soakbench.harness.soak.evidence.live import SilentView
from soakbench.harness.soak.host.procs import ProcReader
from soakbench.harness.soak.loop.driver import watch
from soakbench.harness.soak.loop.overhead import overhead, percentile
from soakbench.harness.soak.loop.settings import MonitorSettings, validate_settings

TREE = Path(__file__).resolve().parents[1] / "tests" / "harness" / "soak" / "faults" / "tree.py"


def _timed_rollups(reads_ms: list[float]) -> Callable[[ProcReader, int], dict[str, int | None]]:
    """ProcReader.memory_rollup wrapped to record each read's wall time (benchmark instrumentation)."""
    original = ProcReader.memory_rollup

    def timed(self: ProcReader, pid: int) -> dict[str, int | None]:
        started = time.perf_counter()
        try:
            return original(self, pid)
        finally:
            reads_ms.append((time.perf_counter() - started) * 1000.0)

    return timed


def measure(processes: int, seconds: float, interval: float, worker_mib: float) -> dict[str, Any]:
    """One monitored run over a tree of ``processes`` processes; the overhead figures of that run."""
    reads_ms: list[float] = []
    original = ProcReader.memory_rollup
    ProcReader.memory_rollup = _timed_rollups(reads_ms)  # type: ignore[method-assign,assignment]  # instrumentation
    try:
        with tempfile.TemporaryDirectory(prefix="soak-overhead-") as tmp:
            log_dir, output = Path(tmp) / "run", Path(tmp) / "soak.json"
            command = (sys.executable, str(TREE), str(log_dir), str(seconds), str(processes - 1))
            settings = MonitorSettings(
                command=(*command, str(worker_mib)),
                mode="monitor",
                log_dir=log_dir,
                output=output,
                min_duration_s=0.0,
                sample_interval_s=interval,
                startup_timeout_s=60.0,
                stale_progress_s=60.0,
                post_shutdown_grace_s=1.0,
                live="off",
            )
            validate_settings(settings)
            result = watch(settings, SilentView())
    finally:
        ProcReader.memory_rollup = original  # type: ignore[method-assign]
    figures = overhead(result)
    counts = [len(s["processes"]) for s in result.samples]
    samples = max(1, len(result.samples))
    figures.update(
        tree_processes_median=sorted(counts)[len(counts) // 2] if counts else 0,
        interval_s=interval,
        worker_mib=worker_mib,
        rollup_reads=len(reads_ms),
        rollup_read_ms_p50=percentile(reads_ms, 50),
        rollup_read_ms_p95=percentile(reads_ms, 95),
        rollup_ms_per_sample=round(sum(reads_ms) / samples, 3),
        returncode=result.trainer_returncode,
    )
    return figures


def _line(f: dict[str, Any]) -> str:
    return (
        f"{f['tree_processes_median']} processes ({f['worker_mib']:g} MiB each): monitor CPU "
        f"{100 * f['cpu_share_of_one_core']:.2f}% of one core; sample p50 {f['sample_ms_p50']:.1f} ms, "
        f"p95 {f['sample_ms_p95']:.1f} ms, max {f['sample_ms_max']:.1f} ms; smaps_rollup "
        f"{f['rollup_ms_per_sample']:.2f} ms per sample ({f['rollup_reads']} reads, p50 "
        f"{f['rollup_read_ms_p50'] or 0:.3f} ms, p95 {f['rollup_read_ms_p95'] or 0:.3f} ms); "
        f"{f['sample_count']} samples at {f['interval_s']:g} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--trees", default="10,100", help="tree sizes (processes), comma-separated")
    parser.add_argument("--worker-mib", type=float, default=0.0, help="touched memory per worker")
    args = parser.parse_args()
    try:
        sizes = [int(v) for v in args.trees.split(",")]
    except ValueError:
        parser.error(f"--trees: expected comma-separated integers, got {args.trees!r}")
    if any(n < 1 for n in sizes):
        parser.error(f"--trees: every size must be >= 1, got {args.trees!r}")
    runs = [measure(n, args.seconds, args.interval, args.worker_mib) for n in sizes]
    print(json.dumps(runs, indent=2))
    for figures in runs:
        print(_line(figures))
    print("targets: CPU share <= 2 % of one core and p95 sample time <= 50 ms on the 10-process tree")
    return 0 if all(f["returncode"] == 0 for f in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
