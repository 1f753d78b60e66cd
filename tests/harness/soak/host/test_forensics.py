"""Stacks before the kill and the limits on a live tree: py-spy's output and failures, project frames,
shutdown hang, idle processes, and real captures of a live Python process (with the real py-spy, the
ptrace-denied test double and --no-stacks)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.host.forensics import (
    CaptureConfig,
    Forensics,
    ForensicsSettings,
    StackTool,
    capture,
    locate_py_spy,
    project_roots,
)
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from soakbench.harness.soak.verdicts.evaluation import evaluate
from soakbench.harness.soak.verdicts.hang import Limits, failure_detail, idle_processes, is_final_record
from soakbench.harness.soak.verdicts.stacks import (
    capture_views,
    error_line,
    failure_kind,
    first_project_frame,
    is_project_file,
    parse_dump,
)
from soakbench.harness.soak.verdicts.trends import LeakTrends
from tests.harness.soak._observations import split

FAKE_PY_SPY = Path(__file__).parents[1] / "fake_tools" / "py-spy"
HERE = str(Path(__file__).parent)
PTRACE_DENIED = (
    "Error: Operation not permitted (os error 1)\n"
    "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'\n"
)


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (PTRACE_DENIED, "ptrace_denied"),
        ("Error: Failed to find python version from target process\n\nStack backtrace:\n 0: x", "not_python"),
        ("Error: Failed to get process executable name. Check that the process is running.", "process_gone"),
        ("Error: something else entirely", "tool_error"),
    ],
)
def test_failure_kind_reads_py_spy_errors(stderr: str, kind: str) -> None:
    assert failure_kind(stderr) == kind
    assert error_line(stderr).startswith("Error:")


def test_project_file_rule() -> None:
    roots, excluded = ["/repo"], ["/repo/.venv"]
    assert is_project_file("/repo/runtime/manager/trainer.py", roots, excluded)
    assert is_project_file("/repo/tests/../runtime/x.py", roots, excluded)
    assert not is_project_file("/repo/.venv/lib/python3.11/threading.py", roots, excluded)
    assert not is_project_file("/repo/lib/site-packages/torch/nn.py", roots, excluded)
    assert not is_project_file("/repository/x.py", roots, excluded)  # a prefix of the name is not a dir
    assert not is_project_file("<string>", roots, excluded)


def _dump_text() -> str:
    return json.dumps(
        [
            {
                "pid": 7,
                "thread_id": 1,
                "thread_name": "MainThread",
                "os_thread_id": 7,
                "active": False,
                "owns_gil": False,
                "frames": [
                    {
                        "name": "clock_nanosleep",
                        "filename": "/lib/libc.so.6",
                        "module": "/lib/libc.so.6",
                        "line": 0,
                    },
                    {
                        "name": "wait",
                        "filename": "/usr/lib/python3.11/threading.py",
                        "module": None,
                        "line": 320,
                    },
                    {"name": "hang_here", "filename": "/repo/job.py", "module": None, "line": 4},
                    {"name": "<module>", "filename": "/repo/job.py", "module": None, "line": 9},
                ],
            }
        ]
    )


def test_parse_dump_marks_native_and_project_frames() -> None:
    (thread,) = parse_dump(_dump_text(), ["/repo"], ["/usr"])
    assert thread["tid"] == 7 and thread["name"] == "MainThread"
    frames = thread["frames"]
    assert [f["native"] for f in frames] == [True, False, False, False]
    assert [f["project"] for f in frames] == [False, False, True, True]
    assert frames[0]["line"] is None and frames[2]["line"] == 4
    assert first_project_frame(frames) == 2
    with pytest.raises(ValueError, match="JSON list of threads"):
        parse_dump('{"pid": 1}', ["/repo"], [])


def test_report_view_highlights_only_the_innermost_project_frame() -> None:
    stack = {"status": "captured", "threads": parse_dump(_dump_text(), ["/repo"], ["/usr"])}
    forensics = {"captures": [{"trigger": "timeout/stale_tick", "processes": [{"pid": 7, "stack": stack}]}]}
    frames = capture_views(forensics)[0]["processes"][0]["stack"]["threads"][0]["frames"]
    assert [f["highlight"] for f in frames] == [False, False, True, False]
    assert capture_views(None) == []


def test_project_roots_are_the_cwd_and_the_scripts_directories(tmp_path: Path) -> None:
    script = tmp_path / "jobs" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    roots = project_roots([sys.executable, "jobs/train.py", "missing.py", "--flag"], str(tmp_path))
    assert roots == (str(tmp_path), str(tmp_path / "jobs"))


def _limits(**kw: float) -> Limits:
    values = {"startup_timeout_s": 5.0, "stale_progress_s": 2.0, "post_shutdown_grace_s": 1.0}
    values.update(kw)
    return Limits(shutdown_timeout_s=3.0, **values)


def test_limits_startup_then_stale() -> None:
    limits = _limits()
    assert limits.check(None, now=4.0, t0=0.0, started=False, last_change=0.0) is None
    assert limits.check(None, now=5.5, t0=0.0, started=False, last_change=0.0) == "timeout/startup"
    progress = {"iteration": 3}
    assert limits.check(progress, now=7.0, t0=0.0, started=True, last_change=5.5) is None
    assert limits.check(progress, now=7.6, t0=0.0, started=True, last_change=5.5) == "timeout/stale_tick"


@pytest.mark.parametrize("final", [{"final": True}, {"phase": "finalize"}])
def test_after_the_final_record_only_the_shutdown_timeout_applies(final: dict[str, Any]) -> None:
    assert is_final_record(final) and not is_final_record({"phase": "train"}) and not is_final_record(None)
    limits = _limits()
    assert limits.check(final, now=10.0, t0=0.0, started=True, last_change=10.0) is None
    # the run dir has not changed for 3.9 s (> stale 2 s): still within grace 1 + timeout 3 of the record
    assert limits.check({"iteration": 9}, now=13.9, t0=0.0, started=True, last_change=10.0) is None
    assert limits.check({"iteration": 9}, now=14.1, t0=0.0, started=True, last_change=10.0) == "shutdown_hang"


def _sample(t: float, *cpu: float) -> dict[str, Any]:
    procs = [{"pid": 100 + i, "start_ticks": 5, "name": f"p{i}", "cpu_s": c} for i, c in enumerate(cpu)]
    return {"t": t, "processes": procs}


def test_idle_processes_are_those_whose_cpu_time_stood_still() -> None:
    samples = [_sample(0.0, 1.0, 2.0), _sample(1.0, 1.5, 2.0), _sample(2.5, 1.9, 2.0, 0.0)]
    idle = idle_processes(samples, window_s=2.0)
    assert [p["pid"] for p in idle] == [101]  # pid 100 advanced; pid 102 is younger than the window
    assert idle[0]["idle_for_s"] == 2.5
    assert idle_processes(samples[:1], window_s=2.0) == []
    detail = failure_detail("timeout/stale_tick", samples, _limits(stale_progress_s=2.0))
    assert detail == "no CPU time used for 2.5 s by pid 101 (p1) at 2.00 CPU-s"
    hang = failure_detail("shutdown_hang", samples, _limits())
    assert hang is not None and hang.startswith("3 process(es) still alive 4 s after the final progress")
    assert failure_detail("timeout/startup", samples, _limits()) is None


def test_the_failure_reason_carries_the_monitor_detail() -> None:
    obs = split(
        mode="monitor",
        monitor_failure="shutdown_hang",
        trainer_returncode=-15,
        run_summary=None,
        residual_processes=[],
        orphaned_shm_segments=[],
        leak_verdicts=LeakTrends.of_verdicts({}),
        duration_s=5.0,
        min_duration_s=0.0,
        monitor_detail="1 process(es) still alive 4 s after the final progress record: pid 9 (x)",
    )
    ev = evaluate(*obs)
    assert ev.failure_classification == "shutdown_hang"
    assert ev.failure_reason is not None
    assert ev.failure_reason.startswith("criterion monitor_status failed: expected completed")
    assert "got shutdown_hang; 1 process(es) still alive 4 s" in ev.failure_reason


def _settings(tmp_path: Path, **kw: Any) -> MonitorSettings:
    base: dict[str, Any] = {
        "command": ("true",),
        "mode": "monitor",
        "log_dir": tmp_path / "run",
        "output": tmp_path / "soak.json",
        "min_duration_s": 0.0,
        "sample_interval_s": 1.0,
        "startup_timeout_s": 5.0,
        "stale_progress_s": 5.0,
        "post_shutdown_grace_s": 0.0,
    }
    return MonitorSettings(**(base | kw))


def test_settings_name_bad_forensics_fields(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"--shutdown-timeout-seconds: must be >= 0, got -1"):
        validate_settings(_settings(tmp_path, forensics=ForensicsSettings(shutdown_timeout_s=-1.0)))
    with pytest.raises(SettingsError, match=r"--py-spy: must be an absolute path"):
        validate_settings(_settings(tmp_path, forensics=ForensicsSettings(py_spy=Path("py-spy"))))
    with pytest.raises(SettingsError, match=r"--py-spy: .* is not an executable file"):
        validate_settings(_settings(tmp_path, forensics=ForensicsSettings(py_spy=tmp_path)))
    validate_settings(_settings(tmp_path, forensics=ForensicsSettings(py_spy=FAKE_PY_SPY)))
    assert not (tmp_path / "run").exists()


def test_py_spy_is_found_beside_the_interpreter() -> None:
    tool = locate_py_spy()
    assert tool.path == str(Path(sys.executable).parent / "py-spy") and tool.reason is None
    assert locate_py_spy(FAKE_PY_SPY).path == str(FAKE_PY_SPY)


HANGER = "import threading\ndef hang_in_named_function():\n    threading.Event().wait()\nhang_in_named_function()\n"


@pytest.fixture
def hanging_process(tmp_path: Path) -> Iterator[dict[str, Any]]:
    script = tmp_path / "hanger.py"
    script.write_text(HANGER)
    proc = subprocess.Popen(["timeout", "60", sys.executable, str(script)])
    child: int | None = None
    try:
        child = _child_pid(proc.pid)
        text = Path(f"/proc/{child}/stat").read_text()
        ticks = int(text[text.rfind(")") + 2 :].split()[19])
        time.sleep(0.5)  # let it reach the wait
        yield {
            "pid": child,
            "start_ticks": ticks,
            "name": "python",
            "cmdline": [str(script)],
            "dir": tmp_path,
        }
    finally:
        if child is not None:  # a SIGKILLed `timeout` cannot pass the kill on: the hanger would outlive it
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait()


def _child_pid(parent: int) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError("the hanging python never started")


def _config(tool: StackTool, root: Path, stacks: bool = True) -> CaptureConfig:
    return CaptureConfig(tool, stacks, (str(root),), (sys.prefix, sys.base_prefix))


def test_real_capture_names_the_function_it_hangs_in(hanging_process: dict[str, Any]) -> None:
    config = _config(locate_py_spy(), hanging_process["dir"])
    done = capture(config, "timeout/stale_tick", [hanging_process], t=1.0)
    assert done["trigger"] == "timeout/stale_tick" and done["elapsed_s"] < config.total_s
    (proc,) = done["processes"]
    assert proc["state"] == "S" and proc["wchan"] and proc["threads"][0]["tid"] == proc["pid"]
    stack = proc["stack"]
    assert stack["status"] == "captured", stack
    frames = stack["threads"][0]["frames"]
    first = frames[first_project_frame(frames) or 0]
    assert first["function"] == "hang_in_named_function" and first["file"].endswith("hanger.py")


def test_ptrace_denied_is_recorded_not_skipped(hanging_process: dict[str, Any]) -> None:
    config = _config(StackTool(str(FAKE_PY_SPY)), hanging_process["dir"])
    (proc,) = capture(config, "timeout/stale_tick", [hanging_process], t=1.0)["processes"]
    stack = proc["stack"]
    assert stack["status"] == "failed" and stack["reason_kind"] == "ptrace_denied"
    assert stack["reason"].startswith("ptrace not permitted (Error: Operation not permitted")
    assert proc["state"] == "S"  # the /proc evidence is still there


def test_no_stacks_and_a_missing_tool_say_so(hanging_process: dict[str, Any]) -> None:
    off = Forensics(_config(locate_py_spy(), hanging_process["dir"], stacks=False), t0=time.monotonic())
    off.capture("external_cancellation", [hanging_process])
    off.capture("residual_processes", [])  # nothing alive: no capture
    section = off.section()
    assert section["stacks"] == {"enabled": False, "reason": "--no-stacks given"}
    (only,) = section["captures"]
    assert only["processes"][0]["stack"]["reason_kind"] == "disabled"
    missing = _config(StackTool(None, "py-spy not found"), hanging_process["dir"])
    (proc,) = capture(missing, "timeout/startup", [hanging_process], t=0.0)["processes"]
    assert proc["stack"]["status"] == "skipped" and proc["stack"]["reason"] == "py-spy not found"


def test_a_vanished_process_is_a_recorded_failure() -> None:
    gone = {"pid": 2**22 + 7, "start_ticks": 1, "name": "gone", "cmdline": []}
    (proc,) = capture(_config(locate_py_spy(), Path(HERE)), "residual_processes", [gone], t=0.0)["processes"]
    assert proc["state"] is None and proc["threads"] == []
    assert proc["stack"]["status"] == "failed" and proc["stack"]["reason_kind"] == "process_gone"


def test_a_capture_that_breaks_is_recorded_and_does_not_raise() -> None:
    broken = Forensics(_config(locate_py_spy(), Path(HERE)), t0=time.monotonic())
    broken.capture("timeout/stale_tick", [{"pid": "not a pid"}])  # a monitor bug, not a process
    (only,) = broken.section()["captures"]
    assert only["processes"] == [] and only["error"].startswith("ValueError")
