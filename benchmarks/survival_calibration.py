"""Calibration of the survival bound: real programs taken to real exhaustion under shrunken limits.

Each run is a real `soak monitor` over a program that leaks at a random pace until the kernel refuses
it (tests/harness/soak/faults/exhaust_fds.py: pipes under a soft RLIMIT_NOFILE it lowers itself;
exhaust_disk.py: files into a small tmpfs mounted for the run, root only). The program records the wall
time of the refusal. The projection is then made from the samples of the first ``--observe-seconds``
only (the monitor's own judgement, harness.soak.verdicts.survival, over the truncated samples and the
limits the monitor recorded), and the observed time from that moment to exhaustion is set against the
reported lower bound: the bound holds when observed >= bound. Prints each run and, per kind, the share
of runs where the bound held and the ratios observed / bound.

    uv run --frozen python benchmarks/survival_calibration.py [--runs 10] [--parallel 4] [--kinds fds,disk]
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer

from soakbench.harness.soak.verdicts.survival import assess_survival

FAULTS = Path(__file__).resolve().parents[1] / "tests" / "harness" / "soak" / "faults"


def _monitor(log_dir: Path, output: Path, command: list[str], extra: list[str]) -> None:
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir),
        "--output", str(output), "--sample-interval-seconds", "0.5", "--startup-timeout-seconds", "10",
        "--stale-progress-seconds", "20", "--post-shutdown-grace-seconds", "0.5", "--live", "off",
        "--min-trend-samples", "8", "--shm-attribution", "evidence", *extra, "--", *command,
    ]  # fmt: skip
    subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)


def _projection(output: Path, observe_s: float, cls: str) -> tuple[float | None, float]:
    """The lower bound (h) on the time to exhaustion from the first ``observe_s`` seconds, and the wall
    time of the last sample used."""
    artifact = json.loads(output.read_text())
    samples_path = output.with_name(output.stem + ".samples.jsonl")
    samples = [json.loads(line) for line in samples_path.read_text().splitlines()]
    startup = artifact["resource_summary"]["startup_end_t"]
    kept = [s for s in samples if s["t"] <= startup + observe_s]
    survival = assess_survival(
        kept, limits=artifact.get("limits"), window=(startup, kept[-1]["t"]), target_s=None, warmup_s=None
    )
    hours = [c.hours_to_exhaustion_lower for c in survival.classes if c.resource_class.startswith(cls)]
    known = [h for h in hours if h is not None]
    return (min(known) if known else None), float(kept[-1]["wall"])


def _fd_run(index: int, root: Path, observe_s: float) -> dict[str, Any]:
    rng = random.Random(index)
    rate, limit = rng.uniform(2.0, 8.0), 400
    run = root / f"fds-{index}"
    run.mkdir()
    command = [
        sys.executable,
        str(FAULTS / "exhaust_fds.py"),
        str(run / "log"),
        f"{rate}",
        f"{limit}",
        f"{index}",
    ]
    _monitor(run / "log", run / "soak.json", command, [])
    return _compare("fds", run, observe_s, {"rate_per_s": rate, "limit": limit})


def _disk_run(index: int, root: Path, observe_s: float) -> dict[str, Any]:
    rng = random.Random(1000 + index)
    rate, size_mib = rng.uniform(0.5, 2.0), 96
    run = root / f"disk-{index}"
    mount = run / "tmpfs"
    mount.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mount)], check=True)
    try:
        command = [
            sys.executable,
            str(FAULTS / "exhaust_disk.py"),
            str(run / "log"),
            str(mount),
            f"{rate}",
            f"{index}",
        ]
        _monitor(run / "log", run / "soak.json", command, ["--watch-path", str(mount)])
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    return _compare("disk:", run, observe_s, {"rate_mib_per_s": rate, "tmpfs_mib": size_mib})


def _compare(cls: str, run: Path, observe_s: float, setting: dict[str, Any]) -> dict[str, Any]:
    exhausted = run / "log" / "exhausted.json"
    if not exhausted.exists():
        return {**setting, "error": "the program did not reach exhaustion"}
    bound_h, cut_wall = _projection(run / "soak.json", observe_s, cls)
    observed_h = (json.loads(exhausted.read_text())["wall"] - cut_wall) / 3600.0
    held = bound_h is None or observed_h >= bound_h
    ratio = None if not bound_h else observed_h / bound_h
    return {**setting, "bound_h": bound_h, "observed_h": observed_h, "held": held, "ratio": ratio}


def main(
    runs: Annotated[int, typer.Option(help="runs per kind")] = 10,
    parallel: Annotated[int, typer.Option(help="runs at once (they mostly sleep)")] = 4,
    observe_seconds: Annotated[float, typer.Option(help="seconds after start-up the projection sees")] = 20.0,
    kinds: Annotated[str, typer.Option(help="fds, disk (disk mounts a tmpfs: root only)")] = "fds,disk",
    json_out: Annotated[Path | None, typer.Option("--json")] = None,
) -> None:
    wanted = [k.strip() for k in kinds.split(",") if k.strip()]
    if "disk" in wanted and os.geteuid() != 0:
        print("disk: skipped (mounting a tmpfs needs root)", file=sys.stderr)
        wanted.remove("disk")
    makers = {"fds": _fd_run, "disk": _disk_run}
    report: dict[str, Any] = {"observe_seconds": observe_seconds, "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="calibration-") as tmp:
        for kind in wanted:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                results = list(
                    pool.map(lambda i, k=kind: makers[k](i, Path(tmp), observe_seconds), range(runs))
                )
            judged = [r for r in results if "error" not in r]
            ratios = sorted(r["ratio"] for r in judged if r["ratio"] is not None)
            report["kinds"][kind] = {
                "runs": results,
                "held_share": sum(r["held"] for r in judged) / len(judged) if judged else None,
                "ratio_min": ratios[0] if ratios else None,
                "ratio_median": ratios[len(ratios) // 2] if ratios else None,
                "ratio_max": ratios[-1] if ratios else None,
            }
    text = json.dumps(report, indent=2)
    print(text)
    if json_out is not None:
        json_out.write_text(text + "\n")


if __name__ == "__main__":
    typer.run(main)
