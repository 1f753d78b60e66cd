"""The monitored tree dies with the soak monitor, and what a dead monitor left is refused and cleaned up by
proven ownership only. Real processes: a `soak monitor` over a child, a detached grandchild and a /dev/shm
segment is SIGKILLed mid-run; sleepers stand in for leftovers of a dead monitor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from soakbench.harness.soak.host.procs import ProcReader, StatFields
from soakbench.harness.soak.loop.leftovers import (
    RECORD_SCHEMA,
    proven_processes,
    proven_segments,
    records_dir,
)
from tests.harness.soak._soakrun import FAULTS, REPO, alive, monitor_args
from tests.harness.soak.test_driver_real import _soak_run_argv

pytestmark = [pytest.mark.soak, pytest.mark.linux_only]

GONE_WITHIN_S = 5.0  # the bound: no tree process and no segment of the run after this
_stat = ProcReader().stat


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CACHE_HOME": str(cache)}


def _wait_for_record(cache: Path, processes: int, segments: int, timeout_s: float) -> dict[str, Any]:
    """The live monitor's record once it names at least ``processes`` tree identities and ``segments``
    /dev/shm segments."""
    deadline = time.monotonic() + timeout_s
    directory = cache / "soakbench" / "soak-monitors"
    while time.monotonic() < deadline:
        for path in directory.glob("*.json"):
            with_tree: dict[str, Any] = json.loads(path.read_text())
            if len(with_tree["processes"]) >= processes and len(with_tree["shm_segments"]) >= segments:
                return with_tree
        time.sleep(0.1)
    raise AssertionError(f"no complete ownership record under {directory} within {timeout_s}s")


def _kill_monitor_mid_run(
    argv: list[str], cache: Path, processes: int, segments: int, timeout_s: float
) -> tuple[set[int], float]:
    """Start the monitor, SIGKILL it once its record names the tree, and assert that within
    GONE_WITHIN_S no tree process, no segment of the run and no record remain; returns the TCP ports the
    tree listened on just before the kill, and the monotonic time of the kill."""
    monitor = subprocess.Popen(
        argv, cwd=REPO, env=_env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        record = _wait_for_record(cache, processes, segments, timeout_s)
        ports = _listening_ports(p["pid"] for p in record["processes"])
    finally:
        monitor.send_signal(signal.SIGKILL)
        monitor.wait()
    killed_at = time.monotonic()
    tree = [(p["pid"], p["start_ticks"]) for p in record["processes"]]
    paths = [Path("/dev/shm") / s["name"] for s in record["shm_segments"]]
    records = cache / "soakbench" / "soak-monitors"
    # The watchdog removes the record last, after the tree is gone: wait for all three within the bound.
    while time.monotonic() - killed_at < GONE_WITHIN_S:
        tree_gone = not any(alive(*ident) for ident in tree) and not any(p.exists() for p in paths)
        if tree_gone and not any(records.glob("*.json")):
            break
        time.sleep(0.05)
    left = [ident for ident in tree if alive(*ident)]
    for pid, _ in left:  # never leave the test's own processes behind, even when it fails
        os.kill(pid, signal.SIGKILL)
    stale = [p for p in paths if p.exists()]
    for path in stale:
        path.unlink()
    assert left == [], f"tree processes alive {GONE_WITHIN_S}s after the monitor's SIGKILL: {left}"
    assert stale == [], f"segments left {GONE_WITHIN_S}s after the monitor's SIGKILL: {stale}"
    assert list(records.glob("*.json")) == []
    return ports, killed_at


def _listening_ports(pids: Iterable[int]) -> set[int]:
    """The TCP ports these processes listen on now (psutil)."""
    ports = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        ports |= {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN}
    return ports


def _host_listening_ports() -> set[int]:
    """Every TCP port in LISTEN state on this host, from the kernel's tables (state 0A)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_sigkill_of_the_monitor_leaves_nothing_running(tmp_path: Path) -> None:
    # parent (the wrapper's pid), child, grandchild in its own session, and the grandchild's segment
    argv, _ = monitor_args(tmp_path, "death_tree.py", "600", stale=30.0)
    _kill_monitor_mid_run(argv, tmp_path / "cache", processes=3, segments=1, timeout_s=30.0)


@pytest.mark.slow
def test_sigkill_of_a_soak_run_monitor_stops_the_trainer(tmp_path: Path) -> None:
    # the trainer and its collector with the run's five /dev/shm segments, as a new user saw them survive
    argv, _ = _soak_run_argv(tmp_path, iterations=100_000, min_duration=1)
    _kill_monitor_mid_run(argv, tmp_path / "cache", processes=2, segments=5, timeout_s=300.0)


@pytest.mark.slow
def test_sigkill_of_the_monitor_of_a_torchrun_job_leaves_no_rank_and_no_rendezvous_port(
    tmp_path: Path,
) -> None:
    # the agent (the monitored root), its two gloo ranks and the rendezvous store the agent listens on
    log_dir, output = tmp_path / "run", tmp_path / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120", "--stale-progress-seconds", "60",
        "--live", "off", "--shm-attribution", "evidence", "--",
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(FAULTS / "ranks_job.py"), str(log_dir), "run",
    ]  # fmt: skip
    ports, killed_at = _kill_monitor_mid_run(
        argv, tmp_path / "cache", processes=3, segments=0, timeout_s=120.0
    )
    assert ports, "the agent's rendezvous store was not listening before the kill"
    # A killed multi-threaded process reads as a zombie once its leader exits, while its other threads
    # still hold the shared fd table: the listening socket closes a moment later, inside the same bound.
    still = ports & _host_listening_ports()
    while still and time.monotonic() - killed_at < GONE_WITHIN_S:
        time.sleep(0.05)
        still = ports & _host_listening_ports()
    assert still == set(), f"ports still listening {GONE_WITHIN_S}s after the monitor's SIGKILL: {still}"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def _dead_monitor_record(cache: Path, proc: subprocess.Popen[bytes], ticks_offset: int) -> Path:
    """A record of a dead monitor (this test's pid with other start ticks) naming ``proc``'s pid with its
    start ticks plus ``ticks_offset`` (non-zero: the pid was reused by an unrelated process)."""
    me, st = _stat(os.getpid()), _stat(proc.pid)
    assert me is not None and st is not None
    shm = Path("/dev/shm") / f"soakbench_test_left_{os.getpid()}"
    shm.write_bytes(b"x")
    record = {
        "schema": RECORD_SCHEMA,
        "monitor": {"pid": me.pid, "start_ticks": me.start_ticks + 1},
        "host": os.uname().nodename,
        "uid": os.getuid(),
        "token": "0" * 32,
        "log_dir": "/nonexistent/run",
        "started_at": 0.0,
        "processes": [{"pid": proc.pid, "start_ticks": st.start_ticks + ticks_offset}],
        "shm_segments": [{"name": shm.name, "inode": shm.stat().st_ino + ticks_offset}],
    }
    directory = cache / "soakbench" / "soak-monitors"
    directory.mkdir(parents=True)
    path = directory / "dead.json"
    path.write_text(json.dumps(record))
    return path


def _soak(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "soakbench.harness.soak.cli", *args]
    return subprocess.run(
        argv, cwd=REPO, env=_env(cache), capture_output=True, text=True, timeout=60, check=False
    )


def test_leftovers_refuse_a_new_monitor_until_cleaned_up(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    cache = tmp_path / "cache"
    record = _dead_monitor_record(cache, sleeper, 0)
    argv, output = monitor_args(tmp_path, "healthy_plateau.py", "1")
    refused = subprocess.run(
        argv, cwd=REPO, env=_env(cache), capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2, refused.stderr
    assert f"pid {sleeper.pid} 'sleep 60'" in refused.stderr and "soak cleanup" in refused.stderr
    assert f"dead soak monitor pid {os.getpid()}" in refused.stderr
    assert not output.exists() and not (tmp_path / "run").exists()  # nothing half-written

    cleaned = _soak(cache, "cleanup")
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"pid {sleeper.pid}" in cleaned.stdout
    assert sleeper.wait(timeout=GONE_WITHIN_S) == -signal.SIGKILL
    assert not (Path("/dev/shm") / f"soakbench_test_left_{os.getpid()}").exists()
    assert not record.exists()


def test_cleanup_never_touches_a_reused_pid(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    cache = tmp_path / "cache"
    record = _dead_monitor_record(cache, sleeper, 1)
    segment = Path("/dev/shm") / f"soakbench_test_left_{os.getpid()}"
    try:
        cleaned = _soak(cache, "cleanup")
        assert cleaned.returncode == 0, cleaned.stderr
        assert "nothing left by a dead soak monitor" in cleaned.stdout
        time.sleep(0.2)
        assert sleeper.poll() is None  # same pid, other start ticks: not provably the run's
        assert segment.exists()  # same name, other inode: not the run's segment
        assert not record.exists()  # a record that proves nothing is stale and removed
    finally:
        segment.unlink(missing_ok=True)


def test_an_unreadable_record_refuses_and_names_the_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    directory = cache / "soakbench" / "soak-monitors"
    directory.mkdir(parents=True)
    (directory / "bad.json").write_text("{")
    done = _soak(cache, "cleanup")
    assert done.returncode == 2
    assert "bad.json: unreadable soak monitor ownership record" in done.stderr


def _st(pid: int, start: int, state: str = "S") -> StatFields:
    return StatFields(pid, "p", state, 1, pid, pid, 0, 0, 1, start, 0)


def test_proof_is_identity_or_token_never_pid_alone() -> None:
    record = {
        "monitor": {"pid": 10, "start_ticks": 100},
        "token": "tok",
        "processes": [{"pid": 11, "start_ticks": 101}, {"pid": 12, "start_ticks": 102}],
    }
    stats = {
        10: _st(10, 100),  # the monitor itself is never a leftover
        11: _st(11, 101),  # recorded identity
        12: _st(12, 999),  # recorded pid, reused: other start ticks, no token
        13: _st(13, 150),  # unrecorded, carries the run's token, started after the monitor
        14: _st(14, 50),  # carries the token but started before the monitor: not ours
        15: _st(15, 160),  # another run's token
        16: _st(16, 101, "Z"),  # zombie
    }
    tokens = {13: "tok", 14: "tok", 15: "other"}
    assert [p["pid"] for p in proven_processes(record, stats, tokens)] == [11, 13]


def test_segments_are_proven_by_name_and_inode() -> None:
    record = {
        "shm_segments": [{"name": "a", "inode": 1}, {"name": "b", "inode": 2}, {"name": "c", "inode": 3}]
    }
    snapshot = {"a": {"inode": 1}, "b": {"inode": 9}}
    assert proven_segments(record, snapshot) == ["a"]


def test_records_live_under_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert records_dir() == tmp_path / "soakbench" / "soak-monitors"


def test_the_root_is_recorded_as_the_command_not_the_wrapper(tmp_path: Path) -> None:
    argv, output = monitor_args(tmp_path, "healthy_plateau.py", "1", trend_samples=1)
    argv[argv.index("--", argv.index("--live")) + 1 :] = [
        "sh",
        "-c",
        f"mkdir -p {tmp_path / 'run'}; sleep 1; touch {tmp_path / 'run' / 'x'}; sleep 1",
    ]
    done = subprocess.run(
        argv, cwd=REPO, env=_env(tmp_path / "cache"), capture_output=True, text=True, timeout=60, check=False
    )
    monitor = json.loads(output.read_text())["monitor"]
    root = next(p for p in monitor["known_processes"] if p["pid"] == monitor["root_pid"])
    assert root["name"] == "sh", (root, done.stderr[-2000:])
