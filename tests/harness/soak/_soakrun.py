"""Helpers for tests that drive `soak monitor` as a real subprocess over the fault programs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAULTS = Path(__file__).resolve().parent / "faults"
REPO = Path(__file__).resolve().parents[3]


@dataclass
class SoakOutcome:
    returncode: int
    stdout: str
    stderr: str
    output: Path

    @property
    def artifact(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.output.read_text())
        return data

    @property
    def monitor(self) -> dict[str, Any]:
        """The artifact's ``monitor`` object (root PID, processes seen, what the monitor killed)."""
        monitor: dict[str, Any] = self.artifact["monitor"]
        return monitor

    def criterion(self, name: str) -> dict[str, Any]:
        return next(c for c in self.artifact["criteria"] if c["name"] == name)


def monitor_args(
    tmp: Path,
    program: str,
    *program_args: str,
    interval: float = 0.2,
    startup: float = 5.0,
    stale: float = 2.0,
    grace: float = 0.5,
    min_duration: float = 0.5,
    attribution: str = "evidence",
    trend_samples: int = 8,
    run_contract: bool = False,
    sampler: str = "auto",
    extra: tuple[str, ...] = (),
) -> tuple[list[str], Path]:
    """argv of `soak monitor` over ``faults/<program>`` (log dir and artifact under ``tmp``). The fault
    programs run seconds, not minutes: ``trend_samples`` (``--min-trend-samples``) is sized for them."""
    log_dir, output = tmp / "run", tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor",
        "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", str(interval), "--startup-timeout-seconds", str(startup),
        "--stale-progress-seconds", str(stale), "--post-shutdown-grace-seconds", str(grace),
        "--termination-grace-seconds", "3", "--min-duration-seconds", str(min_duration),
        "--shm-attribution", attribution, "--live", "plain", "--min-trend-samples", str(trend_samples),
        *(["--run-contract"] if run_contract else []), "--sampler", sampler, *extra,
        "--", sys.executable, str(FAULTS / program), str(log_dir), *program_args,
    ]  # fmt: skip
    return argv, output


def soak_monitor(tmp: Path, program: str, *program_args: str, **kwargs: Any) -> SoakOutcome:
    argv, output = monitor_args(tmp, program, *program_args, **kwargs)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def alive(pid: int, start_ticks: int) -> bool:
    """Same PID, same start ticks, not a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[19]) == start_ticks and fields[0] not in ("Z", "X")


_SEGMENT = re.compile(r"(soakfault|soakbench)_(\d+)_")


def run_segments(outcome: SoakOutcome, prefix: str = "soak") -> list[str]:
    """``/dev/shm`` entries named ``soakfault_<pid>_*`` (fault programs) or ``soakbench_<pid>_*`` (the
    trainer) for a PID the run had, present now; ``prefix`` narrows the kind."""
    pids = {p["pid"] for p in outcome.monitor["known_processes"]}
    found = []
    for name in os.listdir("/dev/shm"):
        match = _SEGMENT.match(name)
        if match and name.startswith(prefix) and int(match.group(2)) in pids:
            found.append(name)
    return sorted(found)


def assert_nothing_left(outcome: SoakOutcome) -> None:
    """Every process the monitor ever saw is gone, and no shm segment of the run is left in /dev/shm
    beyond those the artifact reports as orphaned (the monitor reports them, it does not delete them)."""
    known = outcome.monitor["known_processes"]
    assert known, "the monitor saw no process at all"
    left = [p for p in known if alive(p["pid"], p["start_ticks"])]
    assert left == [], f"processes left running: {left}"
    reported = {s["name"] for s in outcome.artifact["orphaned_shm_segments"]}
    unreported = sorted(set(run_segments(outcome)) - reported)
    assert unreported == [], f"segments of the run left in /dev/shm and not reported: {unreported}"


def remove_fault_segments(outcome: SoakOutcome) -> list[str]:
    """Unlink /dev/shm/soakfault_<pid>_* of the run's processes; returns the names removed."""
    if not outcome.output.exists():
        return []
    names = run_segments(outcome, "soakfault_")
    for name in names:
        os.unlink(f"/dev/shm/{name}")
    return names
