"""Host memory pressure readers (harness/soak/host/pressure.py): the parsers on kernel text, the reader on a
planted /proc and cgroup tree, and the kernel-log tail on what it cannot read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from soakbench.harness.soak.host.pressure import (
    HostReader,
    KmsgTail,
    counter_file,
    killed_in_kmsg,
    memory_cgroup,
    parse_meminfo_available,
    parse_oom_kill,
    parse_psi,
)

PSI = "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=678\n"
V1_CGROUP = "9:name=systemd:/\n4:memory:/jobs/run7\n1:cpu:/\n0::/\n"


def test_meminfo_available_is_read_in_bytes() -> None:
    text = "MemTotal:       32000000 kB\nMemFree:  100 kB\nMemAvailable:   24000000 kB\n"
    assert parse_meminfo_available(text) == 24000000 * 1024
    assert parse_meminfo_available("MemTotal: 1 kB\n") is None  # kernels before 3.14


def test_psi_lines_become_some_and_full() -> None:
    psi = parse_psi(PSI)
    assert psi["some"] == {"avg10": 1.5, "avg60": 0.2, "avg300": 0.0, "total": 12345}
    assert psi["full"]["avg10"] == 0.75 and psi["full"]["total"] == 678
    with pytest.raises(ValueError, match="some/full"):
        parse_psi("partial avg10=1\n")


def test_oom_kill_counter_of_vmstat_and_both_cgroup_versions() -> None:
    assert parse_oom_kill("pgfault 10\noom_kill 3\nnr_free 5\n") == 3
    assert parse_oom_kill("low 0\nhigh 0\nmax 2\noom 2\noom_kill 1\noom_group_kill 0\n") == 1  # v2
    assert parse_oom_kill("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n") == 4  # v1
    assert parse_oom_kill("pgfault 10\n") is None


def test_memory_cgroup_prefers_the_v1_memory_line_else_the_unified_one() -> None:
    assert memory_cgroup(V1_CGROUP) == ("/jobs/run7", 1)
    assert memory_cgroup("0::/user.slice/run.scope\n") == ("/user.slice/run.scope", 2)
    assert memory_cgroup("4:cpu,memory:/a\n") == ("/a", 1)
    assert memory_cgroup("") is None


def test_counter_file_per_version(tmp_path: Path) -> None:
    assert counter_file("/a/b", 1, tmp_path) == tmp_path / "memory/a/b/memory.oom_control"
    assert counter_file("/a", 2, tmp_path) == tmp_path / "a/memory.events"  # pure v2 host
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.procs").write_text("")
    assert counter_file("/a", 2, tmp_path) == tmp_path / "unified/a/memory.events"  # hybrid host


def test_kernel_log_kill_records_name_pid_and_command() -> None:
    record = (
        "3,423,11849786630,-;Memory cgroup out of memory: Killed process 25484 (python3) total-vm:82148kB"
    )
    assert killed_in_kmsg(record) == (25484, "python3")
    assert killed_in_kmsg("6,1,2,-;oom_reaper: reaped process 25484 (python3)") is None


def _plant(tmp_path: Path, pid: int, cgroup: str) -> tuple[Path, Path]:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(V1_CGROUP)
    (proc / "self" / "ns").mkdir()
    (proc / "self" / "ns" / "pid").symlink_to("pid:[4026531836]")  # the initial PID namespace
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cgroup").write_text(f"4:memory:{cgroup}\n0::/\n")
    (proc / "meminfo").write_text("MemAvailable: 1000 kB\n")
    (proc / "vmstat").write_text("oom_kill 7\n")
    for path, kills in (("jobs/run7", 0), (cgroup.lstrip("/"), 2)):
        (cg / "memory" / path).mkdir(parents=True, exist_ok=True)
        (cg / "memory" / path / "memory.oom_control").write_text(f"oom_kill_disable 0\noom_kill {kills}\n")
    return proc, cg


def test_host_block_watches_the_monitor_cgroup_and_each_tree_process_cgroup(tmp_path: Path) -> None:
    proc, cg = _plant(tmp_path, 4242, "/jobs/run7/limited")
    reader = HostReader(
        proc_root=proc, cgroup_root=cg, psi_path=tmp_path / "no-psi", kmsg=KmsgTail(proc_root=proc)
    )
    reader.start()
    first = reader.read([])
    block = reader.read([4242])
    assert first["reading"] == 0 and block["reading"] == 1
    assert block["mem_available_bytes"] == 1000 * 1024 and block["oom_kill_count"] == 7
    assert block["psi_memory"] is None and "no PSI on this kernel" in block["reasons"]["psi_memory"]
    assert [(c["path"], c["oom_kill"]) for c in block["cgroups"]] == [
        (str(cg / "memory/jobs/run7"), 0),
        (str(cg / "memory/jobs/run7/limited"), 2),
    ]
    assert block["cgroup_oom_kill_count"] == 2
    reader.close()


def test_a_kernel_log_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    proc, _ = _plant(tmp_path, 1, "/x")
    tail = KmsgTail(path=tmp_path / "no-kmsg", proc_root=proc)
    assert tail.status()["used"] is False  # never opened: never claimed as read
    tail.open()
    tail.poll(0)
    status = tail.status()
    assert status["used"] is False and "no-kmsg" in str(status["reason"]) and tail.kills == []


def test_a_kernel_log_of_another_pid_namespace_is_not_used(tmp_path: Path) -> None:
    proc, _ = _plant(tmp_path, 1, "/x")
    (proc / "self" / "ns" / "pid").unlink()
    (proc / "self" / "ns" / "pid").symlink_to("pid:[4026532999]")
    tail = KmsgTail(path=Path(os.devnull), proc_root=proc)
    tail.open()
    assert tail.fd is None and "PID namespace" in str(tail.reason)
