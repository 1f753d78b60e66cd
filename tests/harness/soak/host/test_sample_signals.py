"""The sample's signals of the limits that end long runs: the tree's zombies, its ``/dev/shm`` segments,
the disk under its folders, and each process's mapping count and open-files limit. Real programs,
sampled through the real samplers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.host.disk import DiskWatch, TreeSize, tree_size, watched_paths
from soakbench.harness.soak.host.limits_text import OPEN_FILES, soft_limit
from soakbench.harness.soak.host.portable import PortableSampler
from soakbench.harness.soak.host.procs import totals_of
from soakbench.harness.soak.host.sampler import Sampler
from soakbench.harness.soak.host.sampling import LinuxSampler, ProcessSampler
from soakbench.harness.soak.host.shm import snapshot_shm

MIB = 1 << 20
SEGMENT_BYTES = 8 * MIB
ZOMBIES = 3

ZOMBIE_PARENT = f"""
import os, time
for _ in range({ZOMBIES}):
    if os.fork() == 0:
        os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""

SHM_PROGRAM = f"""
import mmap, os, sys, time
from multiprocessing import shared_memory
mode, name, size = sys.argv[1], sys.argv[2], {SEGMENT_BYTES}
if mode == "mapped":  # created, mapped, its fd closed: only the mapping holds it
    fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, size)
    segment = mmap.mmap(fd, size)
    os.close(fd)
    segment[:] = b"\\1" * size
else:
    shm = shared_memory.SharedMemory(name=name, create=True, size=size)
    shm.buf[:size] = b"\\1" * size
    if mode == "left":  # closed, not unlinked: nothing of the run holds it any more
        shm.close()
print("ready", flush=True)
time.sleep(60)
"""

DISK_WRITER = """
import os, sys, time
first, second = sys.argv[1], sys.argv[2]
os.makedirs(first, exist_ok=True)
for index in range(40):
    folder = first if index < 5 else (second if index % 2 else first)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"part-{index}.bin"), "wb") as out:
        out.write(b"\\1" * (1 << 20))
    time.sleep(0.2)
print("done", flush=True)
time.sleep(60)
"""

Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start ``python -c CODE ARGS...`` in a process group of its own and wait for its ``ready`` line
    (unless told not to); every group is killed at the end, forked children included."""
    children: list[subprocess.Popen[bytes]] = []

    def start(code: str, *args: str, wait_ready: bool = True) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-c", code, *args]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True)
        children.append(child)
        if wait_ready:
            assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        return child

    yield start
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _sampler(reader: ProcessSampler, pid: int, log_dir: Path, **fields: Any) -> Sampler:
    """A sampler of the tree rooted at ``pid``, as the monitor builds it (this test is the monitor)."""
    root = reader.stat(pid)
    assert root is not None
    tracker = reader.tracker(os.getpid(), root, set(), "")
    return Sampler(reader, tracker, log_dir, time.monotonic(), **fields)


def _sample(sampler: Sampler) -> dict[str, Any]:
    return sampler.sample(wall=time.time(), now=time.monotonic())


def _until(
    sampler: Sampler, done: Callable[[dict[str, Any]], bool], *, timeout_s: float = 20.0
) -> dict[str, Any]:
    """Samples until ``done`` holds of one (the last taken is returned when the deadline passes)."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = _sample(sampler)
        if done(record) or time.monotonic() > deadline:
            return record
        time.sleep(0.05)


SAMPLERS: dict[str, Callable[[], ProcessSampler]] = {"linux": LinuxSampler, "portable": PortableSampler}


@pytest.mark.linux_only
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_children_never_waited_on_are_counted_as_zombies_with_their_parent(
    name: str, spawn: Spawn, tmp_path: Path
) -> None:
    parent = spawn(ZOMBIE_PARENT)
    sampler = _sampler(SAMPLERS[name](), parent.pid, tmp_path)
    record = _until(sampler, lambda r: r["totals"]["zombies"] == ZOMBIES)
    assert record["totals"]["zombies"] == ZOMBIES
    zombies = record["zombies"]
    assert [z["ppid"] for z in zombies] == [parent.pid] * ZOMBIES
    assert [z["pid"] for z in zombies] == sorted(z["pid"] for z in zombies)
    assert all(z["name"] for z in zombies) and set(zombies[0]) == {"pid", "ppid", "name"}
    assert parent.pid not in {z["pid"] for z in zombies}
    assert not {z["pid"] for z in zombies} & {p["pid"] for p in record["processes"]}  # never sampled


@pytest.fixture
def segment_name() -> Iterator[str]:
    name = f"soaktest_{os.getpid()}_{time.monotonic_ns()}"
    yield name
    Path("/dev/shm", name).unlink(missing_ok=True)


@pytest.mark.linux_only
@pytest.mark.parametrize("mode", ["held", "mapped"])
def test_a_segment_the_run_holds_or_maps_counts_its_allocated_bytes(
    mode: str, spawn: Spawn, tmp_path: Path, segment_name: str
) -> None:
    before = frozenset((name, int(info["inode"])) for name, info in snapshot_shm().items())
    child = spawn(SHM_PROGRAM, mode, segment_name)
    record = _sample(_sampler(LinuxSampler(), child.pid, tmp_path, shm_before=before))
    shm = record["shm"]
    assert shm["segments"].get(segment_name, 0) >= SEGMENT_BYTES, shm
    assert shm["run_bytes"] >= SEGMENT_BYTES and shm["run_bytes"] == sum(shm["segments"].values())
    assert shm["fs_used_bytes"] >= SEGMENT_BYTES and shm["fs_size_bytes"] >= shm["fs_used_bytes"]


@pytest.mark.linux_only
def test_a_segment_left_behind_unheld_is_not_the_runs_but_fills_the_file_system(
    spawn: Spawn, tmp_path: Path, segment_name: str
) -> None:
    before = frozenset((name, int(info["inode"])) for name, info in snapshot_shm().items())
    child = spawn(SHM_PROGRAM, "left", segment_name)
    assert Path("/dev/shm", segment_name).stat().st_blocks * 512 >= SEGMENT_BYTES
    shm = _sample(_sampler(LinuxSampler(), child.pid, tmp_path, shm_before=before))["shm"]
    assert segment_name not in shm["segments"]
    assert shm["fs_used_bytes"] >= SEGMENT_BYTES  # the tmpfs holds it all the same


def test_without_a_shm_root_the_block_is_null(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn("import time; print('ready', flush=True); time.sleep(60)")
    reader = PortableSampler(shm_root=Path("/nonexistent-shm-root"))
    record = _sample(_sampler(reader, child.pid, tmp_path))
    assert record["shm"] == {"run_bytes": None, "segments": {}, "fs_used_bytes": None, "fs_size_bytes": None}


@pytest.mark.linux_only
def test_a_sample_carries_map_count_and_fd_limit_and_sums_the_map_counts(
    spawn: Spawn, tmp_path: Path
) -> None:
    code = "import os, time\nif os.fork():\n    print('ready', flush=True)\ntime.sleep(60)"
    parent = spawn(code)
    sampler = _sampler(LinuxSampler(), parent.pid, tmp_path)
    record = _until(sampler, lambda r: len(r["processes"]) == 2)
    processes = record["processes"]
    assert len(processes) == 2 and all(p["rollup_age_samples"] == 0 for p in processes)
    assert all(isinstance(p["map_count"], int) and p["map_count"] > 0 for p in processes)
    own_limit = soft_limit(Path(f"/proc/{parent.pid}/limits").read_text(), OPEN_FILES)
    assert own_limit is not None and [p["fd_limit"] for p in processes] == [own_limit, own_limit]
    assert record["totals"]["map_count"] == sum(p["map_count"] for p in processes)
    again = _sample(sampler)["processes"]
    assert {p["pid"]: p["map_count"] for p in again} == {p["pid"]: p["map_count"] for p in processes}


def test_totals_sum_map_counts_only_when_every_process_has_one_and_take_the_zombie_count() -> None:
    fds = {"eventfd": 0, "shared_memory": 0, "total": 1}
    base = {"rss_bytes": 1, "pss_bytes": 1, "uss_bytes": 1, "swap_bytes": 0, "threads": 1, "fds": fds,
            "gpu_memory_bytes": None, "fd_limit": 1024}  # fmt: skip
    procs = [{**base, "map_count": 40}, {**base, "map_count": 60}]
    totals = totals_of(procs, gpu_available=False, zombies=2)
    assert (totals["map_count"], totals["zombies"]) == (100, 2) and "fd_limit" not in totals
    procs[1]["map_count"] = None
    assert totals_of(procs, gpu_available=False)["map_count"] is None
    assert totals_of(procs, gpu_available=False)["zombies"] == 0


def test_the_walk_counts_allocated_bytes_of_regular_files_once(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"\1" * MIB)
    os.link(folder / "a.bin", folder / "sub" / "same.bin")  # a hard link: one file's blocks
    with open(folder / "sparse.bin", "wb") as sparse:
        sparse.truncate(64 * MIB)  # a hole: no blocks
    (folder / "link").symlink_to(tmp_path)  # never followed
    size = tree_size(folder)
    assert size is not None and size.files == 2
    assert MIB <= size.allocated_bytes < 2 * MIB
    assert tree_size(tmp_path / "missing") == TreeSize(0, 0)
    single = tree_size(folder / "a.bin")
    assert single is not None and single.files == 1 and single.allocated_bytes >= MIB


def test_the_walk_is_on_a_cost_schedule_and_the_age_says_how_old_it_is(tmp_path: Path) -> None:
    now = [0.0]
    walks: list[Path] = []

    def walk(path: Path) -> TreeSize:
        walks.append(path)
        now[0] += 0.010  # 10 ms a walk: period 5 at the 2 ms budget
        return TreeSize(len(walks), len(walks))

    watch = DiskWatch((tmp_path,), walk=walk, clock=lambda: now[0])
    usages = [watch.sample()[0] for _ in range(7)]
    assert [u.age_samples for u in usages] == [0, 1, 2, 3, 4, 0, 1]
    assert [u.allocated_bytes for u in usages] == [1, 1, 1, 1, 1, 2, 2]  # carried between walks
    assert all(u.fs_size_bytes for u in usages)  # statvfs every sample
    capped = DiskWatch((tmp_path,), max_period=3, walk=walk, clock=lambda: now[0])
    assert [capped.sample()[0].age_samples for _ in range(4)] == [0, 1, 2, 0]


def test_the_log_dir_comes_first_and_each_watch_path_once(tmp_path: Path) -> None:
    log_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    paths = watched_paths(log_dir, [ckpt, log_dir, Path(f"{ckpt}/"), tmp_path / "other"])
    assert paths == (log_dir, ckpt, tmp_path / "other")


@pytest.mark.slow
def test_disk_use_rises_as_a_run_writes_and_a_folder_made_later_starts_at_zero(
    spawn: Spawn, tmp_path: Path
) -> None:
    log_dir, first, later = tmp_path / "run", tmp_path / "ckpt", tmp_path / "later"
    log_dir.mkdir()
    writer = spawn(DISK_WRITER, str(first), str(later), wait_ready=False)
    sampler = _sampler(LinuxSampler(), writer.pid, log_dir, watch_paths=(first, later, first))
    records = [_sample(sampler)]
    assert [d["path"] for d in records[0]["disk"]] == [str(log_dir), str(first), str(later)]
    while records[-1]["disk"][2]["bytes"] < 3 * MIB and len(records) < 400:
        time.sleep(0.1)
        records.append(_sample(sampler))
    firsts = [r["disk"][1]["bytes"] for r in records]
    assert firsts == sorted(firsts) and firsts[-1] > firsts[0] and firsts[-1] >= 5 * MIB
    laters = [r["disk"][2] for r in records]
    missing = [d for d in laters if d["files"] == 0]
    assert missing and missing[0]["bytes"] == 0 and missing[0]["fs_free_bytes"] is not None
    assert laters[-1]["bytes"] >= 3 * MIB and laters[-1]["files"] >= 3
    for entry in records[-1]["disk"]:
        assert entry["fs_size_bytes"] >= entry["fs_free_bytes"] > 0 and entry["age_samples"] >= 0
