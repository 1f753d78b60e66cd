"""A real OOM kill under `soak monitor`: a process allocates inside a memory cgroup with a 96 MiB limit until
the kernel kills it; the artifact says ``oom_killed`` and names it, and the report plots the pressure.

Needs a memory cgroup the test may create a child in (root on a cgroup v1 host, or a delegated v2
subtree with the memory controller); skipped with the reason anywhere else.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from soakbench.harness.soak.host.pressure import CGROUP_ROOT, counter_file, memory_cgroup
from tests.conftest import Chromium
from tests.harness.soak._soakrun import REPO, SoakOutcome, assert_nothing_left, soak_monitor

pytestmark = pytest.mark.soak
LIMIT = 96 << 20


def _limit(cgroup: Path, version: int, limit: int) -> None:
    if version == 1:
        (cgroup / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (cgroup / "memory.memsw.limit_in_bytes").write_text(str(limit))
    else:
        (cgroup / "memory.max").write_text(str(limit))
        with contextlib.suppress(OSError):
            (cgroup / "memory.swap.max").write_text("0")


def _remove(cgroup: Path) -> None:
    for _ in range(50):  # the killed process leaves the cgroup once it is reaped
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    cgroup.rmdir()


@contextlib.contextmanager
def _cgroup(limit: int) -> Iterator[Path]:
    """A new memory cgroup under this process's own, limited to ``limit`` bytes; removed afterwards."""
    found = memory_cgroup(Path("/proc/self/cgroup").read_text())
    if found is None:
        pytest.skip("this process has no memory cgroup (/proc/self/cgroup names none)")
    path, version = found
    parent = counter_file(path, version, CGROUP_ROOT).parent
    cgroup = parent / f"soakbench-oomtest-{os.getpid()}"
    try:
        cgroup.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a memory cgroup under {parent}: {exc.strerror or exc}")
    try:
        _limit(cgroup, version, limit)
    except OSError as exc:
        _remove(cgroup)
        pytest.skip(f"cannot set a memory limit on {cgroup}: {exc.strerror or exc}")
    try:
        yield cgroup
    finally:
        _remove(cgroup)


@pytest.fixture
def limited_cgroup() -> Iterator[Path]:
    with _cgroup(LIMIT) as cgroup:
        yield cgroup


@pytest.mark.parametrize("mode", ["child", "self"])
def test_a_process_oom_killed_in_a_memory_cgroup_is_named(
    tmp_path: Path, limited_cgroup: Path, mode: str
) -> None:
    outcome = soak_monitor(tmp_path, "oom_kill.py", str(limited_cgroup), mode)
    art = outcome.artifact
    assert outcome.returncode == 1, (art["failure_reason"], outcome.stderr[-2000:])
    assert art["failure_classification"] == "oom_killed", art["failure_reason"]
    (kill,) = art["oom"]["kills"]
    root = outcome.monitor["root_pid"]
    if mode == "self":
        assert kill["pid"] == root and kill["exit"] == {
            "returncode": -9,
            "signal": "SIGKILL",
            "source": "waitpid",
        }
        assert art["trainer_returncode"] == -9
    else:
        assert kill["pid"] != root and kill["exit"] is None  # reaped by its parent: only seen to vanish
        assert art["trainer_returncode"] == 0
    assert kill["name"].startswith("python") and kill["last_rss_bytes"] > 16 << 20
    assert {c["path"] for c in kill["counters"]["cgroups"]} == {str(limited_cgroup)}
    if art["oom"]["kernel_log"]["used"]:
        assert re.search(rf"Killed process {kill['pid']} \(", kill["kernel_log"])
    role = "trainer" if mode == "self" else "worker"  # the monitored root, and its direct child
    assert kill["role"] == role
    assert f"{role} (pid {kill['pid']}, {kill['name']}) was OOM-killed" in art["failure_reason"]
    assert str(limited_cgroup) in art["oom"]["host"]["cgroups_watched"]
    assert outcome.criterion("oom_kills")["result"] == "fail"
    assert_nothing_left(outcome)
    html = outcome.output.with_suffix(".html").read_text()
    assert (
        'id="host-pressure"' in html and f"{role} (pid {kill['pid']}, {kill['name']}) was OOM-killed" in html
    )


def test_a_child_oom_killed_between_two_samples_is_named_from_the_kernels_reports(
    tmp_path: Path, limited_cgroup: Path
) -> None:
    # 5 s sampling: the child is forked at about 1 s and killed within about half a second, long before
    # the second sample; the trainer then exits 1 on it
    outcome = soak_monitor(tmp_path, "oom_kill.py", str(limited_cgroup), "brief", interval=5.0, stale=10.0)
    art = outcome.artifact
    forks = art["oom"]["fork_events"]
    if not forks["used"]:
        pytest.skip(f"no process events here: {forks['reason']}")
    if not art["oom"]["kernel_log"]["used"]:
        pytest.skip(f"no kernel log here: {art['oom']['kernel_log']['reason']}")
    assert outcome.returncode == 1 and art["trainer_returncode"] == 1
    assert art["failure_classification"] == "oom_killed", art["failure_reason"]
    (kill,) = art["oom"]["kills"]
    root = outcome.monitor["root_pid"]
    sampled = {p["pid"] for p in outcome.monitor["known_processes"]}
    assert kill["pid"] not in sampled and kill["parent"] == root
    assert kill["exit"] == {"returncode": -9, "signal": "SIGKILL", "source": "fork_events"}
    assert re.search(rf"Killed process {kill['pid']} \(", kill["kernel_log"])
    assert f"pid {kill['pid']} (python" in art["failure_reason"] and "never sampled" in art["failure_reason"]
    assert_nothing_left(outcome)


def test_the_pressure_plot_renders_in_headless_chromium(
    tmp_path: Path, chromium: Chromium, limited_cgroup: Path
) -> None:
    outcome = soak_monitor(tmp_path, "oom_kill.py", str(limited_cgroup), "child")
    url = outcome.output.with_suffix(".html").resolve().as_uri()
    dom = chromium.dump_dom(url)
    assert re.search(
        r'<img id="host-pressure" alt="host memory pressure over time" src="data:image/png;base64,', dom
    )
    assert 'class="reason oom-kill"' in dom
    chromium.screenshot(url, tmp_path / "report.png", "1400,2400")


def _collector_pid(samples: Path, deadline: float) -> int:
    """The trainer's collector, once it has marked itself (``sbk:collector``).

    Waiting for the marker, not just for a child of the trainer, keeps the kill after the collector's
    start: a process moved into the cgroup while still importing dies as an unmarked ``worker``.
    """
    while time.monotonic() < deadline:
        time.sleep(0.5)
        lines = samples.read_text().splitlines() if samples.exists() else []
        try:
            last = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            continue
        if not last or not last.get("progress"):
            continue
        marked = [p["pid"] for p in last["processes"] if p.get("role") == "collector"]
        if marked:
            return int(marked[0])
    raise AssertionError("no marked collector process appeared")


@pytest.mark.slow
def test_a_collector_oom_under_soak_run_is_oom_killed_with_the_collector_failure(tmp_path: Path) -> None:
    # the collector joins a cgroup of 1 MiB: v1 leaves its old pages charged where they were, so its next
    # new pages (tensors, the MuJoCo step) exceed the limit and the kernel kills it
    with _cgroup(1 << 20) as cgroup:
        output = tmp_path / "soak.json"
        argv = [
            sys.executable, "-m", "soakbench.harness.soak.cli", "run",
            "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
            "--num-envs", "16", "--iterations", "100000", "--min-duration-seconds", "0",
            "--sample-interval-seconds", "0.25", "--min-trend-samples", "8",
            "--startup-timeout-seconds", "240", "--stale-progress-seconds", "120",
            "--post-shutdown-grace-seconds", "2", "--termination-grace-seconds", "20",
            "--shm-attribution", "evidence", "--live", "off",
            "--extra-override", "algo.updates_per_iteration=1",  # lifecycle, not the learning recipe
            "--log-dir", str(tmp_path / "run"), "--output", str(output),
        ]  # fmt: skip
        monitor = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            collector = _collector_pid(output.with_name("soak.samples.jsonl"), time.monotonic() + 300)
            (cgroup / "cgroup.procs").write_text(f"{collector}\n")
            _out, err = monitor.communicate(timeout=300)
        finally:
            if monitor.poll() is None:  # SIGTERM lets the monitor stop the trainer's process group first
                monitor.terminate()
                monitor.wait(timeout=120)
    outcome = SoakOutcome(monitor.returncode, "", err, output)
    art = outcome.artifact
    assert monitor.returncode == 1, err[-3000:]
    assert art["failure_classification"] == "oom_killed", art["failure_reason"]
    assert art["shutdown"]["classification"] == "collector_failure"
    assert art["shutdown"]["cause"] == "oom_killed" and art["oom"]["shutdown_cause"] == "oom_killed"
    (kill,) = art["oom"]["kills"]
    assert kill["pid"] == collector and kill["role"] == "collector"
    assert kill["exit"] == {"returncode": -9, "signal": "SIGKILL", "source": "run_summary"}
    assert art["failure_reason"].startswith(f"criterion oom_kills failed: collector (pid {collector}, ")
    assert_nothing_left(outcome)
