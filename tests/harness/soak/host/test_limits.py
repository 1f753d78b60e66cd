"""The limits that end a long run (harness.soak.host.limits): the limits text parser on real and
handwritten texts, real reads of this host and of children started under other limits, and the cgroup
hierarchy walk over cgroup trees written here (the host's own cgroups cannot be varied by a test)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from soakbench.harness.soak.host.cgroups import domain_use
from soakbench.harness.soak.host.limits import HostLimits, Limit, format_bytes, read_limits
from soakbench.harness.soak.host.limits_text import OPEN_FILES, PROCESSES, parse_limits, soft_limit
from soakbench.harness.soak.host.procs import ProcReader

pytestmark = pytest.mark.linux_only

HANDWRITTEN = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max stack size            8388608              unlimited            bytes
Max processes             4096                 8192                 processes
Max open files            1024                 524288               files
Max nice priority         0                    0
Max realtime timeout      unlimited            unlimited            us
"""
NOBODY = 65534


def test_parse_limits_reads_names_with_spaces_unlimited_and_empty_units() -> None:
    limits = parse_limits(HANDWRITTEN)
    assert limits[OPEN_FILES] == (1024, 524288)
    assert limits[PROCESSES] == (4096, 8192)
    assert limits["Max cpu time"] == (None, None)
    assert limits["Max stack size"] == (8388608, None)
    assert limits["Max nice priority"] == (0, 0)
    assert "Limit" not in limits and len(limits) == 6  # the header is no limit
    assert soft_limit(HANDWRITTEN, OPEN_FILES) == 1024
    assert soft_limit(HANDWRITTEN, "Max locked memory") is None


def _rlimit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else value


def test_parse_limits_agrees_with_getrlimit_on_the_real_file() -> None:
    limits = parse_limits(Path("/proc/self/limits").read_text())
    for name, which in ((OPEN_FILES, resource.RLIMIT_NOFILE), (PROCESSES, resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        assert limits[name] == (_rlimit(soft), _rlimit(hard))
    assert len(limits) >= 16


def _one(limits: HostLimits, resource_name: str, source_part: str) -> Limit:
    [found] = [limit for limit in limits.of(resource_name) if source_part in limit.source]
    return found


def test_this_process_has_memory_map_count_fds_and_threads_max() -> None:
    limits = read_limits(root_pid=os.getpid(), watch_paths=[Path.cwd()], shm_root=Path("/dev/shm"))
    [memory] = limits.of("memory")
    assert memory.value is not None and memory.value > 0 and memory.scope == "tree"
    assert memory.in_use is not None and memory.in_use > 0
    [map_count] = limits.of("map_count")
    assert (
        map_count.value == int(Path("/proc/sys/vm/max_map_count").read_text())
        and map_count.scope == "process"
    )
    [fds] = limits.of("fds")
    assert fds.value == _rlimit(resource.getrlimit(resource.RLIMIT_NOFILE)[0]) and fds.in_use is None
    threads_max = _one(limits, "tasks", "kernel.threads-max")
    assert threads_max.value == int(Path("/proc/sys/kernel/threads-max").read_text())
    assert threads_max.in_use is not None and threads_max.in_use >= 1
    [disk] = limits.of("disk")
    assert disk.path == str(Path.cwd()) and disk.value is not None and disk.in_use is not None
    assert 0 < disk.in_use <= disk.value
    [shm] = limits.of("shm_bytes")
    assert shm.value is not None and shm.source == "statvfs /dev/shm"
    assert limits.of("gpu_memory")[0].reason == "NVML unavailable"
    assert {limit.resource for limit in limits.limits} == {
        "memory", "tasks", "shm_bytes", "disk", "map_count", "fds", "gpu_memory",
    }  # fmt: skip


@pytest.fixture
def spawn() -> Iterator[Callable[[Callable[[], None]], subprocess.Popen[bytes]]]:
    """Start ``sleep`` with a preexec setup (its limits, its user); every child is killed at the end."""
    children: list[subprocess.Popen[bytes]] = []

    def start(setup: Callable[[], None]) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(["sleep", "60"], preexec_fn=setup)  # limits and user set before the exec
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()
        child.wait()


def test_a_child_started_with_64_open_files_reports_64_here_and_in_its_sample(
    spawn: Callable[[Callable[[], None]], subprocess.Popen[bytes]],
) -> None:
    child = spawn(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)))
    limits = read_limits(root_pid=child.pid, watch_paths=[], shm_root=None)
    [fds] = limits.of("fds")
    assert fds.value == 64 and str(child.pid) in fds.source
    reader = ProcReader()
    st = reader.stat(child.pid)
    assert st is not None
    record, _ = reader.sample_process(st, gpu_by_pid=None)
    assert record["fd_limit"] == 64 and record["rollup_age_samples"] == 0
    assert isinstance(record["map_count"], int) and record["map_count"] > 0


def _as_nobody_with_nproc(limit: int) -> Callable[[], None]:
    def setup() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        if os.getuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    return setup


def test_rlimit_nproc_of_a_child_shows_with_its_users_task_count(
    spawn: Callable[[Callable[[], None]], subprocess.Popen[bytes]],
) -> None:
    child = spawn(_as_nobody_with_nproc(50))
    nproc = _one(read_limits(root_pid=child.pid, watch_paths=[], shm_root=None), "tasks", "RLIMIT_NPROC")
    assert nproc.value == 50 and nproc.reason is None and str(child.pid) in nproc.source
    assert nproc.in_use is not None and nproc.in_use >= 1  # the child itself runs as that user


@pytest.mark.skipif(os.getuid() != 0, reason="the exemption is root's")
def test_rlimit_nproc_of_root_is_read_but_named_not_enforced(
    spawn: Callable[[Callable[[], None]], subprocess.Popen[bytes]],
) -> None:
    child = spawn(lambda: resource.setrlimit(resource.RLIMIT_NPROC, (50, 50)))
    nproc = _one(read_limits(root_pid=child.pid, watch_paths=[], shm_root=None), "tasks", "RLIMIT_NPROC")
    uid_map = Path(f"/proc/{child.pid}/uid_map").read_text().split()
    if uid_map[:2] == ["0", "0"]:  # root of the initial user namespace
        assert nproc.value is None and nproc.reason is not None and "50" in nproc.reason
    else:
        assert nproc.value == 50


def test_no_shm_root_is_not_observable_with_the_reason() -> None:
    [shm] = read_limits(root_pid=os.getpid(), watch_paths=[], shm_root=None).of("shm_bytes")
    assert shm.value is None and shm.in_use is None and shm.reason is not None and "shm root" in shm.reason


def test_a_watch_path_not_made_yet_reads_its_nearest_existing_ancestor(tmp_path: Path) -> None:
    [disk] = read_limits(root_pid=os.getpid(), watch_paths=[tmp_path / "a" / "b"], shm_root=None).of("disk")
    assert disk.path == str(tmp_path / "a" / "b") and disk.value is not None
    assert f"statvfs {tmp_path} (nearest existing ancestor" in disk.source


def test_gpu_totals_give_one_limit_per_device() -> None:
    limits = read_limits(
        root_pid=os.getpid(), watch_paths=[], shm_root=None, gpu_totals=[(0, 80 << 30), (1, 40 << 30)]
    )
    assert [(g.value, g.source) for g in limits.of("gpu_memory")] == [
        (80 << 30, "NVML device 0 total"),
        (40 << 30, "NVML device 1 total"),
    ]
    [blind] = read_limits(
        root_pid=os.getpid(), watch_paths=[], shm_root=None, gpu_reason="driver not loaded"
    ).of("gpu_memory")
    assert blind.value is None and blind.reason == "driver not loaded"


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


PID = 4242
UNLIMITED_V1 = "9223372036854771712\n"


def _fake_proc(tmp_path: Path, cgroup: str) -> Path:
    proc = tmp_path / "proc"
    _write(proc, {
        f"{PID}/cgroup": cgroup,
        f"{PID}/limits": HANDWRITTEN,
        f"{PID}/status": "Name:\tsleep\nUid:\t1000\t1000\t1000\t1000\nThreads:\t3\n",
        "meminfo": "MemTotal:       16384 kB\nMemAvailable:    4096 kB\nSwapTotal:    2097152 kB\n",
        "loadavg": "0.00 0.01 0.05 1/321 999\n",
        "sys/kernel/threads-max": "63000\n",
        "sys/vm/max_map_count": "65530\n",
    })  # fmt: skip
    return proc


def test_cgroup_v2_takes_the_tightest_level_and_its_usage(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "0::/user.slice/job.scope\n")
    sys_root = tmp_path / "sys"
    _write(sys_root / "fs" / "cgroup", {
        "cgroup.controllers": "cpu memory pids\n",
        "user.slice/memory.max": "536870912\n", "user.slice/memory.current": "1000\n",
        "user.slice/pids.max": "max\n", "user.slice/pids.current": "9\n",
        "user.slice/job.scope/memory.max": "max\n", "user.slice/job.scope/memory.current": "10\n",
        "user.slice/job.scope/pids.max": "100\n", "user.slice/job.scope/pids.current": "7\n",
    })  # fmt: skip
    limits = read_limits(root_pid=PID, watch_paths=[], shm_root=None, proc_root=proc, sys_root=sys_root)
    [memory] = limits.of("memory")
    assert (memory.value, memory.in_use) == (536870912, 1000)
    assert memory.source == f"cgroup v2 memory.max ({sys_root}/fs/cgroup/user.slice)"
    pids = _one(limits, "tasks", "pids.max")
    assert (pids.value, pids.in_use) == (100, 7) and "job.scope" in pids.source
    nproc = _one(limits, "tasks", "RLIMIT_NPROC")
    assert (nproc.value, nproc.in_use) == (4096, 3)  # uid 1000 owns this one process of 3 threads
    threads = _one(limits, "tasks", "threads-max")
    assert (threads.value, threads.in_use) == (63000, 321)
    [fds] = limits.of("fds")
    assert fds.value == 1024


def test_cgroup_v1_memory_and_pids_walk_up_the_hierarchy(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path, "9:name=systemd:/\n8:pids:/api/abc\n4:memory:/api/abc\n1:cpu,cpuacct:/\n0::/\n"
    )
    sys_root = tmp_path / "sys"
    _write(sys_root / "fs" / "cgroup", {
        "memory/memory.limit_in_bytes": UNLIMITED_V1, "memory/memory.usage_in_bytes": "99999\n",
        "memory/api/memory.limit_in_bytes": "1073741824\n", "memory/api/memory.usage_in_bytes": "555\n",
        "memory/api/abc/memory.limit_in_bytes": UNLIMITED_V1, "memory/api/abc/memory.usage_in_bytes": "5\n",
        "pids/api/pids.max": "64\n", "pids/api/pids.current": "5\n",
        "pids/api/abc/pids.max": "max\n", "pids/api/abc/pids.current": "2\n",
    })  # fmt: skip
    limits = read_limits(root_pid=PID, watch_paths=[], shm_root=None, proc_root=proc, sys_root=sys_root)
    [memory] = limits.of("memory")
    assert (memory.value, memory.in_use) == (1073741824, 555)
    assert memory.source == f"cgroup v1 memory.limit_in_bytes ({sys_root}/fs/cgroup/memory/api)"
    pids = _one(limits, "tasks", "pids.max")
    assert (pids.value, pids.in_use) == (64, 5) and pids.source.startswith("cgroup v1 pids.max")
    assert memory.usage_file == f"{sys_root}/fs/cgroup/memory/api/memory.usage_in_bytes"
    assert pids.usage_file == f"{sys_root}/fs/cgroup/pids/api/pids.current"


def test_a_memory_domain_counts_its_working_set_not_the_cache_it_will_reclaim(tmp_path: Path) -> None:
    """usage 900 with 700 of inactive file cache: 200 stand between the cgroup and its OOM killer."""
    proc = _fake_proc(tmp_path, "4:memory:/api\n8:pids:/api\n0::/\n")
    sys_root = tmp_path / "sys"
    _write(sys_root / "fs" / "cgroup", {
        "memory/api/memory.limit_in_bytes": "1000\n", "memory/api/memory.usage_in_bytes": "900\n",
        "memory/api/memory.stat": "cache 750\nrss 150\ninactive_file 690\ntotal_inactive_file 700\n",
    })  # fmt: skip
    limits = read_limits(root_pid=PID, watch_paths=[], shm_root=None, proc_root=proc, sys_root=sys_root)
    [memory] = limits.of("memory")
    assert (memory.value, memory.in_use) == (1000, 200)  # the hierarchical total_inactive_file wins
    usage = Path(str(memory.usage_file))
    assert domain_use("memory", usage) == 200
    (usage.parent / "memory.stat").write_text("rss 999\n")  # no file cache at all: the whole usage
    assert domain_use("memory", usage) == 900
    assert domain_use("tasks", usage) == 900 and domain_use("memory", tmp_path / "gone") is None


def test_no_cgroup_limit_falls_back_to_memtotal_and_says_swap_is_not_counted(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "0::/user.slice\n")
    sys_root = tmp_path / "sys"
    _write(sys_root / "fs" / "cgroup", {
        "cgroup.controllers": "memory pids\n", "user.slice/memory.max": "max\n", "user.slice/pids.max": "max\n",
    })  # fmt: skip
    limits = read_limits(root_pid=PID, watch_paths=[], shm_root=None, proc_root=proc, sys_root=sys_root)
    [memory] = limits.of("memory")
    assert (memory.value, memory.in_use) == (16384 * 1024, (16384 - 4096) * 1024)
    assert memory.source == f"{proc}/meminfo MemTotal (swap 2.0 GiB not counted)"
    pids = _one(limits, "tasks", "pids.max")
    assert pids.value is None and pids.reason is not None and "no cgroup v2 pids.max is set" in pids.reason


def test_unreadable_limits_are_none_with_a_reason(tmp_path: Path) -> None:
    empty = tmp_path / "proc"
    empty.mkdir()
    limits = read_limits(root_pid=PID, watch_paths=[], shm_root=None, proc_root=empty, sys_root=tmp_path)
    for limit in limits.limits:
        assert limit.value is None and limit.reason, limit


def test_limits_round_trip_through_json() -> None:
    limits = read_limits(
        root_pid=os.getpid(), watch_paths=[Path("/nonexistent/ckpt")], shm_root=Path("/dev/shm"),
        gpu_totals=[(0, 1 << 30)],
    )  # fmt: skip
    again = HostLimits.from_json(json.loads(json.dumps(limits.to_json())))
    assert again == limits and again.to_json() == limits.to_json()
    assert set(limits.to_json()) == {"read_at_wall", "limits"}
    assert set(limits.limits[0].to_json()) == {
        "resource", "scope", "value", "source", "in_use", "reason", "path", "usage_file",
    }  # fmt: skip


def test_bytes_in_a_source_read_as_a_person_would() -> None:
    assert (format_bytes(0), format_bytes(512), format_bytes(2 << 30)) == ("0 B", "512 B", "2.0 GiB")
