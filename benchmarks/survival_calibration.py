"""Calibration of the survival bound: real programs taken to real exhaustion under shrunken limits.

Each run is a real `soak monitor` over a program that leaks at a random pace until the kernel refuses
it (tests/harness/soak/faults/exhaust_fds.py: pipes under a soft RLIMIT_NOFILE it lowers itself;
exhaust_disk.py: files into a small tmpfs mounted for the run, root only; exhaust_memory.py: touched
memory in a v1 memory cgroup made for the run, root only, which the monitor runs in too: the limit it
reads is the cgroup's, and the cgroup's use at that moment includes the monitor's own). The program
records the wall time of the refusal, or, killed by the cgroup's OOM killer, its last progress record
does (within one 0.1 s tick). The projection is then made from the samples of the first ``--observe-seconds``
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
from json_output import JsonOut, write_json

from soakbench.harness.soak.verdicts.survival import assess_survival

FAULTS = Path(__file__).resolve().parents[1] / "tests" / "harness" / "soak" / "faults"


def _monitor(
    log_dir: Path,
    output: Path,
    command: list[str],
    extra: list[str],
    prefix: tuple[str, ...] | list[str] = (),
) -> None:
    argv = [
        *prefix,
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


MEMORY_V1 = Path("/sys/fs/cgroup/memory")


def _memory_cgroup_parent() -> Path | None:
    """This process's v1 memory cgroup directory, where runs' cgroups are made (None: no v1 memory
    hierarchy, or not writable)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            parent = MEMORY_V1 / path.lstrip("/")
            return parent if os.access(parent, os.W_OK) else None
    return None


def _memory_run(index: int, root: Path, observe_s: float) -> dict[str, Any]:
    rng = random.Random(2000 + index)
    rate, limit_mib = rng.uniform(2.0, 8.0), 480
    run = root / f"memory-{index}"
    run.mkdir()
    parent = _memory_cgroup_parent()
    if parent is None:
        return {"error": "no writable v1 memory cgroup"}
    group = parent / f"soakbench-calibration-{os.getpid()}-{index}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
        command = [sys.executable, str(FAULTS / "exhaust_memory.py"), str(run / "log"), f"{rate}", f"{index}"]
        enter = ["sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh"]
        _monitor(run / "log", run / "soak.json", command, [], prefix=enter)
    finally:
        group.rmdir()
    setting = {"rate_mib_per_s": rate, "limit_mib": limit_mib}
    return _compare("pss", run, observe_s, setting, killed_at_limit=True)


def _exhausted_wall(log: Path, *, killed_at_limit: bool) -> float | None:
    """When the program hit its limit: the refusal it recorded; else, for a program the kernel kills at
    its limit (``killed_at_limit``: the OOM killer), its last progress record."""
    exhausted = log / "exhausted.json"
    if exhausted.exists():
        return float(json.loads(exhausted.read_text())["wall"])
    progress = log / "progress.jsonl"
    if not killed_at_limit or not progress.exists():
        return None
    return float(json.loads(progress.read_text().splitlines()[-1])["time"])


def _compare(
    cls: str, run: Path, observe_s: float, setting: dict[str, Any], *, killed_at_limit: bool = False
) -> dict[str, Any]:
    wall = _exhausted_wall(run / "log", killed_at_limit=killed_at_limit)
    if wall is None:
        return {**setting, "error": "the program did not reach exhaustion"}
    bound_h, cut_wall = _projection(run / "soak.json", observe_s, cls)
    observed_h = (wall - cut_wall) / 3600.0
    held = bound_h is None or observed_h >= bound_h
    ratio = None if not bound_h else observed_h / bound_h
    return {**setting, "bound_h": bound_h, "observed_h": observed_h, "held": held, "ratio": ratio}


def main(
    runs: Annotated[int, typer.Option(help="runs per kind")] = 10,
    parallel: Annotated[int, typer.Option(help="runs at once (they mostly sleep)")] = 4,
    observe_seconds: Annotated[float, typer.Option(help="seconds after start-up the projection sees")] = 20.0,
    kinds: Annotated[
        str, typer.Option(help="fds, disk, memory (disk mounts a tmpfs, memory makes a v1 cgroup: root only)")
    ] = "fds,disk,memory",
    json_out: JsonOut = None,
) -> None:
    wanted = [k.strip() for k in kinds.split(",") if k.strip()]
    for kind in ("disk", "memory"):
        if kind in wanted and os.geteuid() != 0:
            print(f"{kind}: skipped (a tmpfs or a memory cgroup needs root)", file=sys.stderr)
            wanted.remove(kind)
    makers = {"fds": _fd_run, "disk": _disk_run, "memory": _memory_run}
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
    write_json(json_out, text)


if __name__ == "__main__":
    typer.run(main)
