"""`soak monitor` over the hang fault programs: the stacks taken before the kill name the function each
process hangs in, a final record then a hang is `shutdown_hang`, ptrace denied and --no-stacks are
recorded with the kill still on time, and the HTML report shows the stacks (headless Chromium)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Chromium
from tests.harness.soak._soakrun import REPO, SoakOutcome, assert_nothing_left, monitor_args

pytestmark = pytest.mark.soak

FAKE_PY_SPY = Path(__file__).parent / "fake_tools" / "py-spy"


def _monitor(
    tmp: Path, program: str, *extra: str, program_args: tuple[str, ...] = (), **kwargs: Any
) -> SoakOutcome:
    """`soak monitor` over ``faults/<program>`` with ``extra`` monitor options."""
    argv, output = monitor_args(tmp, program, *program_args, **kwargs)
    cut = argv.index("--")
    argv[cut:cut] = list(extra)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def _captured(outcome: SoakOutcome) -> dict[str, dict[str, Any]]:
    """The single capture's processes, by the name of the innermost project frame (or 'child')."""
    (only,) = outcome.artifact["forensics"]["captures"]
    found = {}
    for proc in only["processes"]:
        frames = [f for t in proc["stack"]["threads"] for f in t["frames"]]
        named = [f["function"] for f in frames if f["project"]]
        found[named[0] if named else proc["stack"]["reason_kind"] or "child"] = proc
    return found


def test_a_hang_in_a_named_function_is_in_the_artifact_and_report(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "hang_in_function.py", stale=1.5)
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "timeout/stale_tick"
    assert art["trainer_returncode"] == -signal.SIGTERM
    assert re.search(r"no CPU time used for [\d.]+ s by pid \d+ \(python\)", art["failure_reason"])
    (capture,) = art["forensics"]["captures"]
    assert capture["trigger"] == "timeout/stale_tick" and len(capture["processes"]) == 2
    assert capture["elapsed_s"] < art["forensics"]["time_bound_s"]["total"]
    root = _captured(outcome)["wait_for_the_lock_forever"]
    assert root["pid"] == outcome.monitor["root_pid"] and root["stack"]["status"] == "captured"
    assert root["wchan"] and root["state"] == "S" and root["stack"]["native"] is True
    child = next(p for p in capture["processes"] if p["pid"] != root["pid"])
    child_frames = [f["function"] for t in child["stack"]["threads"] for f in t["frames"]]
    assert "child_waits_on_pipe" in child_frames
    html = outcome.output.with_suffix(".html").read_text()
    highlighted = re.findall(r'<li class="frame project first-project"><code>([^<]+)</code>', html)
    assert highlighted == ["wait_for_the_lock_forever"]
    assert_nothing_left(outcome)


def test_final_record_then_no_exit_is_a_shutdown_hang(tmp_path: Path) -> None:
    # stale 1.5 s < grace 0.5 + shutdown timeout 2.5: a stale rule would fire first; the final record
    # hands the verdict to the shutdown timeout instead
    outcome = _monitor(tmp_path, "final_then_hang.py", "--shutdown-timeout-seconds", "2.5", stale=1.5)
    art = outcome.artifact
    assert outcome.returncode == 1 and art["failure_classification"] == "shutdown_hang", art["failure_reason"]
    assert art["monitor_failure"] == "shutdown_hang" and art["timing"]["shutdown_timeout_s"] == 2.5
    assert "1 process(es) still alive 3 s after the final progress record" in art["failure_reason"]
    (capture,) = art["forensics"]["captures"]
    assert capture["trigger"] == "shutdown_hang"
    assert "linger_after_final" in _captured(outcome)
    assert_nothing_left(outcome)


def test_ptrace_denied_is_recorded_and_the_kill_is_on_time(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "hang_in_function.py", "--py-spy", str(FAKE_PY_SPY), stale=1.5)
    art = outcome.artifact
    assert art["failure_classification"] == "timeout/stale_tick"
    assert art["forensics"]["tool"]["path"] == str(FAKE_PY_SPY)
    (capture,) = art["forensics"]["captures"]
    for proc in capture["processes"]:
        assert proc["stack"]["reason_kind"] == "ptrace_denied", proc["stack"]
        assert "ptrace not permitted" in proc["stack"]["reason"] and proc["kernel_stack"]
    assert capture["elapsed_s"] < 2.0
    # 1 s of work, 1.5 s stale window, a sample interval, the capture, then SIGTERM (it dies at once)
    assert art["timing"]["duration_s"] < 1.0 + 1.5 + 0.2 + 2.0 + 3.0
    assert "ptrace not permitted" in outcome.output.with_suffix(".html").read_text()
    assert_nothing_left(outcome)


def test_no_stacks_is_recorded(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "hang_in_function.py", "--no-stacks", stale=1.5)
    forensics = outcome.artifact["forensics"]
    assert forensics["stacks"] == {"enabled": False, "reason": "--no-stacks given"}
    (capture,) = forensics["captures"]
    assert {p["stack"]["reason_kind"] for p in capture["processes"]} == {"disabled"}
    assert all(p["state"] == "S" for p in capture["processes"])  # /proc evidence is still taken
    assert 'id="stacks-disabled"' in outcome.output.with_suffix(".html").read_text()
    assert_nothing_left(outcome)


def test_a_residual_process_is_captured_before_it_is_killed(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "daemon_orphan.py", program_args=("2",))
    art = outcome.artifact
    assert art["failure_classification"] == "resource_leak"
    (capture,) = art["forensics"]["captures"]
    assert capture["trigger"] == "residual_processes"
    residual = {p["pid"] for p in art["post_shutdown_residual_processes"]}
    assert {p["pid"] for p in capture["processes"]} == residual
    assert all(p["state"] == "S" and p["stack"]["status"] == "captured" for p in capture["processes"])
    assert_nothing_left(outcome)


def test_a_passing_run_takes_no_stacks(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "healthy_plateau.py", "--no-stacks")
    assert outcome.returncode == 0, outcome.artifact["failure_reason"]
    assert outcome.artifact["forensics"]["captures"] == []
    assert 'id="no-captures"' in outcome.output.with_suffix(".html").read_text()


def test_report_stacks_render_in_headless_chromium(tmp_path: Path, chromium: Chromium) -> None:
    outcome = _monitor(tmp_path, "hang_in_function.py", stale=1.5)
    url = outcome.output.with_suffix(".html").resolve().as_uri()
    dom = chromium.dump_dom(url)
    assert 'id="forensics"' in dom and 'data-trigger="timeout/stale_tick"' in dom
    assert re.search(r'first-project"><code>wait_for_the_lock_forever</code>', dom)
    chromium.screenshot(url, tmp_path / "report.png", "1400,2400")
