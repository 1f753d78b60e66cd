"""Fault injection under `soak monitor`: each planted failure class fails with the right classification and
leaves nothing running; healthy sawtooth/plateau programs pass. Real processes, short runs (~3-6 s each)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.soak._soakrun import (
    REPO,
    SoakOutcome,
    assert_nothing_left,
    monitor_args,
    remove_fault_segments,
    soak_monitor,
)

pytestmark = [pytest.mark.soak, pytest.mark.linux_only]


def _verdicts(outcome: SoakOutcome) -> dict[str, str]:
    verdicts: dict[str, str] = outcome.artifact["resource_summary"]["leak_verdicts"]
    return verdicts


@pytest.mark.parametrize("program", ["healthy_sawtooth.py", "healthy_plateau.py"])
def test_healthy_programs_pass(tmp_path: Path, program: str) -> None:
    outcome = soak_monitor(tmp_path, program, "6")
    art = outcome.artifact
    assert outcome.returncode == 0, (art["failure_reason"], outcome.stderr[-2000:])
    assert art["status"] == "passed" and art["failure_classification"] is None
    assert "growing" not in _verdicts(outcome).values()
    assert {
        c["result"] for c in art["criteria"] if c["name"].startswith(("run_", "replay_", "inference_"))
    } == {"not_applicable"}
    assert_nothing_left(outcome)
    monitor = art["monitor"]
    assert monitor["root_pid"] in {p["pid"] for p in monitor["known_processes"]}
    assert monitor["killed_by_monitor"] == [] and monitor["monitor_error"] is None
    assert monitor["progress_parse_errors"] == 0 and Path(monitor["console_log_path"]).is_file()
    lines = Path(art["samples_path"]).read_text().splitlines()
    assert len(lines) == art["resource_summary"]["sample_count"] >= 10


@pytest.mark.parametrize(
    ("program", "resource"),
    [
        ("leak_eventfd.py", "eventfd"),
        ("leak_shm_fd.py", "shared_memory_fd"),
        ("leak_child_rss.py", "rss"),
    ],
)
def test_growth_is_a_resource_leak(tmp_path: Path, program: str, resource: str) -> None:
    outcome = soak_monitor(tmp_path, program, "4")
    assert outcome.returncode == 1
    assert outcome.artifact["failure_classification"] == "resource_leak"
    assert _verdicts(outcome)[resource] == "growing", outcome.artifact["resource_summary"]["trends"][resource]
    assert outcome.criterion("leak_verdicts")["result"] == "fail"
    assert_nothing_left(outcome)


def test_daemonized_orphan_is_a_residual_and_is_killed(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "daemon_orphan.py", "2")
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "resource_leak"
    residual = art["post_shutdown_residual_processes"]
    assert len(residual) == 1 and residual[0]["pid"] != outcome.monitor["root_pid"]
    assert outcome.criterion("post_shutdown_residual_processes")["result"] == "fail"
    assert_nothing_left(outcome)  # the monitor killed it after listing it


@pytest.mark.parametrize(
    ("mode", "attribution", "evidence"),
    [("held", "evidence", "seen_open"), ("flash", "host", "new_same_uid")],
)
def test_shm_closed_without_unlink_is_orphaned(
    tmp_path: Path, mode: str, attribution: str, evidence: str
) -> None:
    outcome = soak_monitor(tmp_path, "shm_unlinked.py", mode, attribution=attribution)
    try:
        art = outcome.artifact
        assert outcome.returncode == 1 and art["failure_classification"] == "resource_leak"
        ours = [s for s in art["orphaned_shm_segments"] if s["name"].endswith(f"_{mode}")]
        assert len(ours) == 1 and evidence in ours[0]["evidence"], art["orphaned_shm_segments"]
        assert_nothing_left(outcome)
    finally:
        assert remove_fault_segments(outcome), "the fault segment should still have been there"


def test_stale_hang_times_out(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "stale_hang.py", "1", stale=1.5)
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "timeout/stale_tick"
    assert art["trainer_returncode"] == -signal.SIGTERM
    assert_nothing_left(outcome)


def test_silent_start_times_out(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "silent_start.py", startup=2.0)
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "timeout/startup"
    assert art["resource_summary"]["startup_end_t"] is None
    assert_nothing_left(outcome)


def test_nonzero_exit_fails(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "nonzero_exit.py", "1.5", "3")
    art = outcome.artifact
    assert outcome.returncode == 1 and art["trainer_returncode"] == 3
    assert art["failure_classification"] == "trainer_failure"
    assert_nothing_left(outcome)


def test_too_short_fails(tmp_path: Path) -> None:
    outcome = soak_monitor(tmp_path, "nonzero_exit.py", "1.5", "0", min_duration=30)
    assert outcome.returncode == 1 and outcome.artifact["failure_classification"] == "too_short"
    assert outcome.criterion("min_duration")["result"] == "fail"
    assert_nothing_left(outcome)


def test_sigterm_to_the_monitor_cancels_and_cleans_up(tmp_path: Path) -> None:
    argv, output = monitor_args(tmp_path, "healthy_plateau.py", "60")
    monitor = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = output.with_name(output.stem + ".samples.jsonl")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not samples.exists() or len(samples.read_text().splitlines()) < 5):
        time.sleep(0.1)
    monitor.send_signal(signal.SIGTERM)
    _out, err = monitor.communicate(timeout=60)
    outcome = SoakOutcome(monitor.returncode, _out, err, output)
    assert outcome.returncode == 1, err[-2000:]
    assert outcome.artifact["failure_classification"] == "external_cancellation"
    assert_nothing_left(outcome)


def test_live_off_prints_no_live_view_but_still_the_verdict(tmp_path: Path) -> None:
    """`--live off` drops the per-sample lines; the verdict and where it was written still reach stdout."""
    outcome = soak_monitor(tmp_path, "stale_hang.py", "1", stale=1.5, extra=("--live", "off"))
    assert outcome.returncode == 1 and outcome.artifact["failure_classification"] == "timeout/stale_tick"
    assert "FAILED" in outcome.stdout and "timeout/stale_tick" in outcome.stdout, outcome.stdout
    assert f"artifact: {outcome.output}" in outcome.stdout
    assert "[soak]" not in outcome.stderr  # no live view: no progress line was printed
    assert_nothing_left(outcome)
