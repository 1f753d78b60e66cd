"""False-alarm rate of ``probe compare``: A/A pairs of real probes with identical settings.

Runs ``--probes N`` probes of the same settings one after another and compares every pair (earlier as
BASE, later as NEW: N(N-1)/2 pairs, 21 for N = 7; pairs far apart in time see more load drift than a
back-to-back CI pair, so the rate is if anything pessimistic). Prints, per measure and overall, how
often a verdict was ``slower`` or ``faster`` (a false alarm: nothing changed), and how often the
``--fail-on-regression`` gate (the report's ``regression``: a headline measure ``slower``) would have
failed, beside what a gate on every measure would have done. With ``--sleep-fraction F`` it also runs
``--slowed-probes M`` (default N) probes that add a test-only sleep of F x the first probe's median
iteration time to every timed step, interleaved in time with the plain ones (plain, slowed, plain, ...,
so a load drift lands on both kinds), and compares every (plain, slowed) pair: the gate's rate is then
the detection rate. Not a test: nothing is asserted, the figures are printed.

    uv run --frozen python benchmarks/probe_false_alarm.py [--probes 7] [--num-envs 32] [--iters 20]
        [--rounds 5] [--processes 3] [--threshold 0.05] [--sleep-fraction 0] [--slowed-probes N]
        [--keep /abs/dir]

``--keep`` leaves the probe artifacts and compare reports in that directory instead of a temporary one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADLINE = ("env_control_steps_per_s", "efficiency")


def probe(out: Path, args: argparse.Namespace, sleep_ms: float = 0.0) -> None:
    command = [
        sys.executable, "-m", "soakbench.harness.probe", "--backends", "mujoco", "--num-envs", str(args.num_envs),
        "--warmup", "5", "--iters", str(args.iters), "--rounds", str(args.rounds),
        "--processes", str(args.processes), "--test-step-sleep-ms", str(sleep_ms), "--output", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    print(f"probed {out.name}", flush=True)


def compare(base: Path, new: Path, report: Path, threshold: float) -> dict[str, object]:
    command = [
        sys.executable, "-m", "soakbench.harness.probe", "compare", str(base), str(new),
        "--threshold", str(threshold), "--json", "--json-file", str(report),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def median_iteration_ms(artifact: dict[str, object]) -> float:
    entry = artifact["backends"]["mujoco"]  # type: ignore[index]  # parsed JSON of a known shape
    return float(entry["summary"]["phases"]["iteration_ms"]["median"])


def tally_pairs(
    pairs: list[tuple[Path, Path]], tmp: Path, threshold: float, tag: str
) -> dict[str, Counter[str]]:
    """Compare every pair; per measure, how many times each verdict came out, and per pair whether the
    gate (``regression``) or a gate on every measure would fail."""
    tally: dict[str, Counter[str]] = {}
    any_call: Counter[str] = Counter()
    any_phase: Counter[str] = Counter()
    gates: Counter[str] = Counter()
    for index, (base, new) in enumerate(pairs):
        report = compare(base, new, tmp / f"report-{tag}-{index}.json", threshold)
        verdicts = {row["measure"]: row["verdict"] for row in report["measures"]}  # type: ignore[attr-defined]
        for measure, verdict in verdicts.items():
            tally.setdefault(measure, Counter())[verdict] += 1
        any_call.update({v for v in verdicts.values() if v in ("slower", "faster")})
        phases = {v for m, v in verdicts.items() if m not in HEADLINE}
        any_phase.update(phases & {"slower", "faster"})
        gates["slower" if report["regression"] else "pass"] += 1
        gates["every measure: slower" if "slower" in verdicts.values() else "every measure: pass"] += 1
        shares = [report[side]["other_cpu_share"] for side in ("base", "new")]  # type: ignore[index]
        print(
            f"pair {index + 1}/{len(pairs)} {base.name} -> {new.name} (other CPU share {shares}): "
            f"regression={report['regression']} {json.dumps(verdicts)}",
            flush=True,
        )
    tally["ANY PHASE (pairs)"] = any_phase
    tally["ANY MEASURE (pairs)"] = any_call
    tally["GATE --fail-on-regression (pairs)"] = gates
    return tally


def report(title: str, tally: dict[str, Counter[str]], pairs: int) -> None:
    print(f"\n{title} over {pairs} pairs")
    for measure, counts in tally.items():
        print(
            f"  {measure:34s} slower {counts['slower'] / pairs:4.0%}  faster {counts['faster'] / pairs:4.0%}  "
            f"{dict(counts)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=7)
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--sleep-fraction", type=float, default=0.0)
    parser.add_argument("--slowed-probes", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    print(f"settings: {vars(args)}", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="probe-aa-") as tmp_dir:
        tmp = args.keep if args.keep is not None else Path(tmp_dir)
        plain = [tmp / f"plain-{i}.json" for i in range(args.probes)]
        count = args.probes if args.slowed_probes is None else args.slowed_probes
        slowed = [tmp / f"slowed-{i}.json" for i in range(count if args.sleep_fraction > 0 else 0)]
        probe(plain[0], args)
        sleep_ms = args.sleep_fraction * median_iteration_ms(json.loads(plain[0].read_text()))
        for slow, path in itertools.zip_longest(slowed, plain[1:]):  # interleaved in time
            if slow is not None:
                probe(slow, args, sleep_ms)
            if path is not None:
                probe(path, args)
        pairs = list(itertools.combinations(plain, 2))
        report("A/A (false alarms)", tally_pairs(pairs, tmp, args.threshold, "aa"), len(pairs))
        if slowed:
            pairs = list(itertools.product(plain, slowed))
            title = f"A/B with a {sleep_ms:.3f} ms sleep per step (detection)"
            report(title, tally_pairs(pairs, tmp, args.threshold, "ab"), len(pairs))
    print(f"\nwall time {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
