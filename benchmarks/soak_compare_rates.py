"""False-alarm and detection rates of ``soak compare`` on real short soaks of one program.

Runs ``--plain N`` soaks of the healthy plateau fault program under ``soak monitor`` and ``--leaky M``
soaks of the same command with its test-only eventfd leak switched on (an environment variable, so the
command and thus the workload stay the same). Every pair of plain soaks is an A/A pair (earlier as
BASE); every (plain, leaky) pair is a detection pair. Prints, per measure, how often each verdict came
out. Not a test: nothing is asserted.

    uv run --frozen python benchmarks/soak_compare_rates.py [--plain 7] [--leaky 3] [--duration 6]
        [--keep /abs/dir]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "tests" / "harness" / "soak" / "faults" / "healthy_plateau.py"


def soak(folder: Path, duration: float, leak: bool) -> Path:
    """One real `soak monitor` of the program in ``folder``; returns its artifact."""
    folder.mkdir(parents=True)
    log_dir, output = folder / "run", folder / "soak.json"
    command = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.2", "--startup-timeout-seconds", "5", "--stale-progress-seconds", "2",
        "--post-shutdown-grace-seconds", "0.5", "--min-duration-seconds", "0.5", "--live", "off",
        "--shm-attribution", "evidence", "--min-trend-samples", "8",
        "--", sys.executable, str(PROGRAM), str(log_dir), str(duration),
    ]  # fmt: skip
    env = {**os.environ, "SOAKBENCH_TEST_LEAK_EVENTFD": "1" if leak else "0"}
    subprocess.run(command, cwd=REPO, capture_output=True, check=False, env=env, timeout=300)
    print(f"soaked {folder.name}", flush=True)
    return output


def compare(base: Path, new: Path, report: Path) -> dict[str, str]:
    command = [
        sys.executable,
        "-m",
        "soakbench.harness.soak.cli",
        "compare",
        str(base),
        str(new),
        "--json",
        str(report),
    ]
    subprocess.run(command, cwd=REPO, capture_output=True, check=True, timeout=300)
    return {row["measure"]: row["verdict"] for row in json.loads(report.read_text())["measures"]}


def tally(title: str, pairs: list[tuple[Path, Path]], reports: Path) -> None:
    counts: dict[str, Counter[str]] = {}
    calls: Counter[str] = Counter()
    for index, (base, new) in enumerate(pairs):
        verdicts = compare(base, new, reports / f"{base.parent.name}-{new.parent.name}-{index}.json")
        for measure, call in verdicts.items():
            counts.setdefault(measure, Counter())[call] += 1
        calls.update({v for v in verdicts.values() if v in ("slower", "faster")})
    print(f"\n{title} over {len(pairs)} pairs; pairs with any call: {dict(calls)}")
    for measure, seen in counts.items():
        print(f"  {measure:24s} {dict(seen)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plain", type=int, default=7)
    parser.add_argument("--leaky", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-compare-") as tmp_dir:
        tmp = args.keep if args.keep is not None else Path(tmp_dir)
        plain = [soak(tmp / f"plain-{i}", args.duration, False) for i in range(args.plain)]
        leaky = [soak(tmp / f"leaky-{i}", args.duration, True) for i in range(args.leaky)]
        tally("A/A (false alarms)", list(itertools.combinations(plain, 2)), tmp)
        tally("plain -> leaky (detection)", list(itertools.product(plain, leaky)), tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
