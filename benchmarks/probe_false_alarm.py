"""False-alarm rate of ``probe compare``: A/A pairs of real probes with identical settings.

Runs ``--pairs`` pairs of probes (each pair: two probes of the same settings, back to back), compares
each pair with ``probe compare`` and prints, per measure and overall, how often a verdict was ``slower``
or ``faster`` (a false alarm: nothing changed) and how often it was ``no_change`` / ``inconclusive``.
With ``--sleep-fraction F`` the second probe of each pair adds a test-only sleep of F x the first probe's
median iteration time to every timed step, and the printed rate is then the detection rate. Not a test:
nothing is asserted, the figures are printed.

    uv run --frozen python benchmarks/probe_false_alarm.py [--pairs 20] [--num-envs 32] [--iters 20]
        [--rounds 5] [--processes 3] [--threshold 0.05] [--sleep-fraction 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def probe(out: Path, args: argparse.Namespace, sleep_ms: float = 0.0) -> dict[str, object]:
    command = [
        sys.executable, "-m", "harness.probe", "--backends", "mujoco", "--num-envs", str(args.num_envs),
        "--warmup", "5", "--iters", str(args.iters), "--rounds", str(args.rounds),
        "--processes", str(args.processes), "--test-step-sleep-ms", str(sleep_ms), "--output", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    artifact: dict[str, object] = json.loads(out.read_text())
    return artifact


def compare(base: Path, new: Path, report: Path, threshold: float) -> dict[str, object]:
    command = [
        sys.executable, "-m", "harness.probe", "compare", str(base), str(new),
        "--threshold", str(threshold), "--json", str(report),
    ]  # fmt: skip
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    result: dict[str, object] = json.loads(report.read_text())
    return result


def median_iteration_ms(artifact: dict[str, object]) -> float:
    entry = artifact["backends"]["mujoco"]  # type: ignore[index]  # parsed JSON of a known shape
    return float(entry["summary"]["phases"]["iteration_ms"]["median"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--sleep-fraction", type=float, default=0.0)
    args = parser.parse_args()
    tally: dict[str, Counter[str]] = {}
    pairs_with_alarm = 0
    with tempfile.TemporaryDirectory(prefix="probe-aa-") as tmp:
        for pair in range(args.pairs):
            base = Path(tmp) / f"{pair}-a.json"
            sleep_ms = args.sleep_fraction * median_iteration_ms(probe(base, args))
            probe(Path(tmp) / f"{pair}-b.json", args, sleep_ms)
            report = compare(base, Path(tmp) / f"{pair}-b.json", Path(tmp) / f"{pair}.json", args.threshold)
            verdicts = {row["measure"]: row["verdict"] for row in report["measures"]}  # type: ignore[attr-defined]
            for measure, verdict in verdicts.items():
                tally.setdefault(measure, Counter())[verdict] += 1
            alarm = any(v in ("slower", "faster") for v in verdicts.values())
            pairs_with_alarm += alarm
            print(f"pair {pair + 1}/{args.pairs}: {json.dumps(verdicts)}", flush=True)
    print(f"\nsettings: {vars(args)}")
    for measure, counts in tally.items():
        alarms = counts["slower"] + counts["faster"]
        print(f"{measure:28s} {dict(counts)}  slower-or-faster rate {alarms / args.pairs:.0%}")
    print(f"pairs with any slower/faster verdict: {pairs_with_alarm}/{args.pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
