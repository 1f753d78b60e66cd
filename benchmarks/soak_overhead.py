"""Soak monitor overhead: its own CPU time as a share of one core, and the time to take one sample.

Runs the real monitor (``harness.soak.driver.watch``) in this process over a tree of about 10 processes
(tests/harness/soak/faults/tree.py: a parent and 9 light workers) at 1 s sampling, then prints the
figures measured in that one run. Targets (docs/soak.md): CPU share <= 2 % of one core, p95 sample time
<= 50 ms. Not a test: no thresholds are asserted, the figures are printed.

    uv run --frozen python benchmarks/soak_overhead.py [--seconds 30] [--interval 1] [--children 9]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from harness.soak.driver import MonitorSettings, overhead, validate_settings, watch
from harness.soak.live import SilentView

TREE = Path(__file__).resolve().parents[1] / "tests" / "harness" / "soak" / "faults" / "tree.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--children", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-overhead-") as tmp:
        log_dir, output = Path(tmp) / "run", Path(tmp) / "soak.json"
        settings = MonitorSettings(
            command=(sys.executable, str(TREE), str(log_dir), str(args.seconds), str(args.children)),
            mode="monitor",
            log_dir=log_dir,
            output=output,
            min_duration_s=0.0,
            sample_interval_s=args.interval,
            startup_timeout_s=60.0,
            stale_progress_s=60.0,
            post_shutdown_grace_s=1.0,
            live="off",
        )
        validate_settings(settings)
        result = watch(settings, SilentView())
    figures = overhead(result)
    counts = [len(s["processes"]) for s in result.samples]
    figures["tree_processes_median"] = sorted(counts)[len(counts) // 2] if counts else 0
    figures["interval_s"] = args.interval
    share = figures["cpu_share_of_one_core"]
    print(json.dumps(figures, indent=2))
    print(
        f"monitor CPU: {100 * share:.2f}% of one core (target <= 2%); "
        f"sample time p50 {figures['sample_ms_p50']:.1f} ms, p95 {figures['sample_ms_p95']:.1f} ms "
        f"(target <= 50 ms); tree of {figures['tree_processes_median']} processes, {figures['sample_count']} "
        f"samples at {args.interval:g} s"
    )
    return 0 if result.trainer_returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
