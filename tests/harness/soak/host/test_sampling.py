"""The sampler interface (harness.soak.host.sampling) and the portable psutil sampler (harness.soak.host.portable):
choice, identity, records, totals, token adoption, and what is not observable. Mostly pure; the real
process reads use psutil only, so they run wherever psutil does."""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from soakbench.harness.soak.cli import build_app
from soakbench.harness.soak.evidence.artifact import validation_errors
from soakbench.harness.soak.host.portable import (
    UNOBSERVABLE_CLASSES,
    PortableSampler,
    TokenTracker,
    portable_totals,
    start_ticks_of,
    state_of,
)
from soakbench.harness.soak.host.procs import ProcReader
from soakbench.harness.soak.host.sampling import (
    LINUX_CAPABILITIES,
    resolve_choice,
    sampler_problem,
)
from soakbench.harness.soak.host.token import RUN_TOKEN_ENV
from soakbench.harness.soak.loop.leftovers import RECORD_SCHEMA, clean, find_leftovers
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from soakbench.harness.soak.verdicts.evaluation import evaluate
from soakbench.harness.soak.verdicts.judgement import declared_limits
from soakbench.harness.soak.verdicts.observation import observe_classes
from soakbench.harness.soak.verdicts.trends import leak_verdicts
from tests.harness.soak._observations import split

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _fake_proc(tmp_path: Path, present: bool) -> Path:
    root = tmp_path / "proc"
    if present:
        (root / "self").mkdir(parents=True)
        (root / "self" / "stat").write_text("1 (x) R 0 0 0")
    return root


def test_auto_is_linux_where_proc_exists_else_portable(tmp_path: Path) -> None:
    assert resolve_choice("auto", _fake_proc(tmp_path / "a", True)) == "linux"
    assert resolve_choice("auto", _fake_proc(tmp_path / "b", False)) == "portable"
    assert resolve_choice("portable", _fake_proc(tmp_path / "c", True)) == "portable"


def test_bad_sampler_choices_name_the_flag(tmp_path: Path) -> None:
    assert sampler_problem("auto") is None and sampler_problem("portable") is None
    bad = sampler_problem("proc")
    assert bad is not None and bad.startswith("--sampler:") and "auto, linux, portable" in bad
    no_proc = sampler_problem("linux", _fake_proc(tmp_path, False))
    assert no_proc is not None and "--sampler linux" in no_proc and "--sampler portable" in no_proc
    with pytest.raises(ValueError, match="--sampler"):
        resolve_choice("proc")


def test_settings_and_cli_refuse_a_bad_sampler_with_exit_2(tmp_path: Path) -> None:
    settings = MonitorSettings(
        command=("true",), mode="monitor", log_dir=tmp_path / "run", output=tmp_path / "soak.json",
        min_duration_s=0.0, sample_interval_s=1.0, startup_timeout_s=5.0, stale_progress_s=5.0,
        post_shutdown_grace_s=0.0, sampler="proc",  # type: ignore[arg-type]
    )  # fmt: skip
    with pytest.raises(SettingsError, match="--sampler"):
        validate_settings(settings)
    args = ["monitor", "--sampler", "proc", "--log-dir", str(tmp_path / "run")]
    done = CliRunner().invoke(build_app(), [*args, "--output", str(tmp_path / "soak.json"), "--", "true"])
    assert done.exit_code == 2 and "--sampler" in done.output
    run = [
        "run",
        "--sampler",
        "proc",
        "--log-dir",
        str(tmp_path / "run"),
        "--output",
        str(tmp_path / "s.json"),
    ]
    done = CliRunner().invoke(build_app(), run)
    assert done.exit_code == 2 and "--sampler" in done.output
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_identity_is_clock_ticks_after_boot_and_states_map_to_the_tracker_letters() -> None:
    assert start_ticks_of(1000.25, 1000.0, 100) == 25
    assert start_ticks_of(1000.0 + 3.0 / 100 + 1e-9, 1000.0, 100) == 3
    assert state_of(psutil.STATUS_ZOMBIE) == "Z" and state_of(psutil.STATUS_DEAD) == "X"
    assert state_of(psutil.STATUS_SLEEPING) == "sleeping"


def _record(rss: int | None, fds: int | None, uss: int | None = 10) -> dict[str, Any]:
    return {
        "rss_bytes": rss,
        "threads": 1,
        "fds": {"total": fds},
        "gpu_memory_bytes": None,
        "pss_bytes": None,
        "uss_bytes": uss,
        "swap_bytes": 0,
    }


def test_portable_totals_are_null_where_a_process_could_not_be_read() -> None:
    totals = portable_totals([_record(100, 4), _record(50, None)], gpu_available=False)
    assert totals["process_count"] == 2 and totals["rss_bytes"] == 150 and totals["threads"] == 2
    assert totals["fd_total"] is None and totals["pss_bytes"] is None and totals["uss_bytes"] == 20
    assert totals["eventfd"] is None and totals["shared_memory_fd"] is None
    assert totals["gpu_memory_bytes"] is None and totals["swap_bytes"] == 0


@dataclass(frozen=True)
class _St:
    pid: int
    ppid: int
    start_ticks: int
    state: str = "S"
    comm: str = "p"


def test_token_tracker_adopts_a_token_carrier_started_after_the_root_once() -> None:
    stats = {
        10: _St(10, 1, 1000),  # root
        11: _St(11, 10, 1001),  # child: found by descent
        20: _St(20, 1, 1005),  # double-forked away, carries the token
        30: _St(30, 1, 1006),  # unrelated newcomer
        40: _St(40, 1, 900),  # carries the token but predates the root: never adopted
        50: _St(50, 1, 1007),  # the watchdog: excluded
    }
    asked: list[int] = []

    def token_of(pid: int) -> str | None:
        asked.append(pid)
        return "tok" if pid in (20, 40, 50) else None

    tracker = TokenTracker(99, 10, 1000, exclude={50}, token="tok", token_of=token_of)
    assert [st.pid for st in tracker.members(stats)] == [10, 11, 20]
    assert sorted(asked) == [20, 30]  # root and child are known by descent; 40 predates; 50 excluded
    stats[20] = _St(20, 1, 1005, state="Z")
    assert [st.pid for st in tracker.members(stats)] == [10, 11]
    assert sorted(asked) == [20, 30]  # each identity is asked once
    assert (20, 1005) in tracker.known


@pytest.fixture
def child() -> Any:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    yield proc
    proc.kill()
    proc.wait()


def test_portable_sampler_reads_a_real_child(child: subprocess.Popen[bytes]) -> None:
    sampler = PortableSampler()
    st = sampler.stat(child.pid)
    assert st is not None and st.ppid == os.getpid() and child.pid in sampler.all_stats()
    record, shm = sampler.sample_process(st, gpu_by_pid=None)
    assert record["pid"] == child.pid and record["start_ticks"] == st.start_ticks
    assert record["rss_bytes"] > 0 and record["threads"] >= 1 and record["cpu_s"] >= 0
    assert record["fds"]["total"] >= 3 and record["fds"]["eventfd"] is None
    assert record["cmdline"][0] == sys.executable and record["gpu_memory_bytes"] is None
    assert record["uss_bytes"] is None or record["uss_bytes"] > 0
    assert shm == set()
    assert sampler.is_alive(child.pid, st.start_ticks)
    assert not sampler.is_alive(child.pid, st.start_ticks + 1)  # same PID, other start: not ours
    child.kill()
    child.wait()
    time.sleep(0.05)
    assert not sampler.is_alive(child.pid, st.start_ticks) and sampler.stat(child.pid) is None


@pytest.mark.linux_only
def test_portable_identity_and_rss_match_proc(child: subprocess.Popen[bytes]) -> None:
    linux, portable = ProcReader(), PortableSampler()
    for pid in (os.getpid(), child.pid, 1):
        proc_st, psutil_st = linux.stat(pid), portable.stat(pid)
        assert proc_st is not None and psutil_st is not None
        assert (psutil_st.start_ticks, psutil_st.ppid) == (proc_st.start_ticks, proc_st.ppid)
    record, _ = portable.sample_process(portable.stat(child.pid), None)  # type: ignore[arg-type]
    assert {record[k] is None for k in ("pss_bytes", "uss_bytes", "swap_bytes")} == {False}


def test_unobservable_classes_and_shm_are_named_never_passed() -> None:
    samples = [json.loads(line) for line in (FIXTURES / "samples_clean.jsonl").read_text().splitlines()]
    leak = leak_verdicts(samples, 40.0)
    observation = observe_classes(samples, leak, 30, UNOBSERVABLE_CLASSES)
    classes = observation["classes"]
    assert (
        classes["eventfd"]["status"] == "not_observable" and "cannot classify" in classes["eventfd"]["reason"]
    )
    assert classes["rss"]["status"] == "observed"
    base: dict[str, Any] = {
        "mode": "monitor", "monitor_failure": None, "trainer_returncode": 0, "run_summary": None,
        "residual_processes": [], "orphaned_shm_segments": [], "leak_verdicts": leak,
        "duration_s": 100.0, "min_duration_s": 0.0, "observation": observation,
    }  # fmt: skip
    shm_blind = evaluate(*split(**base, shm_unobservable="no /dev/shm here"))
    row = next(c for c in shm_blind.criteria if c.name == "orphaned_shm_segments")
    assert row.result == "not_applicable" and row.value == "not observable: no /dev/shm here"
    seen = evaluate(*split(**base))
    assert next(c for c in seen.criteria if c.name == "orphaned_shm_segments").result == "pass"


def test_declared_limits_read_the_artifact_section() -> None:
    assert declared_limits(None) == ({}, None)  # written before samplers: the Linux sampler
    assert declared_limits(LINUX_CAPABILITIES.describe("linux")) == ({}, None)
    macos = PortableSampler(Path("/nonexistent-shm-root")).capabilities.describe("portable")
    classes, shm = declared_limits(macos)
    assert classes == UNOBSERVABLE_CLASSES and shm is not None and "/nonexistent-shm-root" in shm


def test_the_sampler_section_is_validated() -> None:
    artifact = json.loads((FIXTURES / "artifact_clean.json").read_text())
    assert validation_errors(artifact) == []  # fixtures predate the section: still valid
    with_section = {**artifact, "sampler": PortableSampler().capabilities.describe("portable")}
    assert validation_errors(with_section) == []
    broken = copy.deepcopy(with_section)
    broken["sampler"]["name"] = "proc"
    assert any(e.startswith("$.sampler.name") for e in validation_errors(broken))


def test_a_dead_monitors_run_is_proven_and_stopped_through_the_portable_sampler(tmp_path: Path) -> None:
    """The ownership record works over psutil as over /proc: the run's token proves the process."""
    token = "f" * 32
    env = {**os.environ, RUN_TOKEN_ENV: token}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        record = {
            "schema": RECORD_SCHEMA, "monitor": {"pid": 2**22 + 7, "start_ticks": 1},  # no such monitor
            "host": socket.gethostname(), "uid": os.getuid(), "token": token, "log_dir": str(tmp_path),
            "started_at": 0.0, "processes": [], "shm_segments": [],
        }  # fmt: skip
        path = tmp_path / "records" / "dead.json"
        path.parent.mkdir()
        path.write_text(json.dumps(record))
        sampler = PortableSampler()
        [left] = find_leftovers(path.parent, sampler)
        assert [p["pid"] for p in left.processes] == [proc.pid]
        clean(path, left.record, sampler)
        assert proc.wait(timeout=5) == -9 and not path.exists()
    finally:
        proc.kill()
        proc.wait()


def test_the_live_view_shows_what_the_sampler_cannot_see_as_na() -> None:
    from soakbench.harness.soak.evidence.live import summarize

    totals = portable_totals([_record(None, 4)], gpu_available=False)
    fields = summarize(
        {"t": 5.0, "totals": totals, "progress": None}, phase="running", max_iterations=None, min_duration_s=0
    )
    assert (fields["rss_mib"], fields["eventfd"], fields["shm_fd"], fields["fds"]) == (
        "n/a",
        "n/a",
        "n/a",
        "4",
    )


def test_the_html_report_names_the_sampler_and_what_it_could_not_see(tmp_path: Path) -> None:
    from soakbench.harness.soak.evidence.report import render_report

    shutil.copy(FIXTURES / "samples_clean.jsonl", tmp_path)
    artifact = json.loads((FIXTURES / "artifact_clean.json").read_text())
    artifact["sampler"] = PortableSampler(Path("/nonexistent-shm-root")).capabilities.describe("portable")
    target = tmp_path / "artifact_clean.json"
    target.write_text(json.dumps(artifact))
    html = render_report(target).read_text()
    assert "sampler: portable" in html and "eventfd</td><td>not observable: the portable sampler" in html
    assert "/dev/shm</td><td>not observable: no /nonexistent-shm-root directory" in html


def test_pss_is_declared_unobservable_where_psutil_has_none() -> None:
    from soakbench.harness.soak.host.portable import unobservable_classes

    assert "pss" not in unobservable_classes("linux")
    darwin = unobservable_classes("darwin")
    assert "PSS on Linux only, not on darwin" in darwin["pss"]
    assert {"eventfd", "shared_memory_fd"} <= set(darwin)
