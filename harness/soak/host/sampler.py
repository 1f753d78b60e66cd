"""One soak sample: the run's process tree (a harness.soak.host.sampling sampler), GPU memory via NVML,
run-dir liveness, progress, and what the run uses of the limits that end long runs (the tree's zombies,
its ``/dev/shm`` segments, the disk under its folders).

Sample record (one line of ``<artifact stem>.samples.jsonl``; see docs/soak-reference.md, "What one sample
holds")::

    {"t": s since monitor start, "wall": unix s, "sample_ms": time to take this sample (ms),
     "processes": [{pid, start_ticks, ppid, name, role, cmdline, rss_bytes, pss_bytes, uss_bytes,
                    swap_bytes, map_count: int | null, fd_limit: int | null, rollup_age_samples,
                    threads, cpu_s,
                    fds: {pipe, socket, eventfd, eventpoll, memfd, shared_memory, nvidia, other, total},
                    gpu_memory_bytes: int | null}],
     "totals": {process_count, rss_bytes, pss_bytes, uss_bytes, swap_bytes, map_count, zombies, threads,
                eventfd, shared_memory_fd, fd_total, gpu_memory_bytes: int | null},
     "zombies": [{pid, ppid, name}] (the tree's defunct processes, by pid),
     "shm": {run_bytes, segments: {name: bytes}, fs_used_bytes, fs_size_bytes} (harness.soak.host.shm),
     "disk": [{path, bytes, files, fs_free_bytes, fs_size_bytes, age_samples}] (the log dir, then each
             watch path; harness.soak.host.disk),
     "domains": {resource: int | null} (each limit's domain's current use, read from its ``usage_file``
                (harness.soak.host.limits): a cgroup's task count, or its memory working set (usage less
                the inactive file cache the kernel reclaims before it kills: what the OOM killer is
                near), every process of the cgroup included, the monitor too; only where a limit names
                such a file),
     "gpu": {available, reason, devices: [{index, uuid, used_bytes}], process_memory_reason: str | null},
     "gpu_health": the run's GPUs (harness.soak.host.gpu_watch): {available, reason, devices: [{index,
                   uuid, sm_clock_mhz, mem_clock_mhz, clock_event_reasons, temperature_c, power_w,
                   ecc_uncorrected}], xid_events: [{xid, index, uuid, after_t, t, wall}], event_error},
     "host": memory pressure and OOM-kill counters (harness.soak.host.pressure),
     "liveness": {latest_mtime_ns, file_count, total_bytes, changed},
     "progress": last progress.jsonl record or null}

``map_count`` (lines of ``/proc/<pid>/maps``) and ``fd_limit`` (the soft ``RLIMIT_NOFILE``, null when
unlimited) are read with PSS on its cost schedule and carried between reads; ``rollup_age_samples`` is
their age too. The portable sampler writes the same shape with null where psutil cannot see a figure (fd
classes, ``eventfd`` and ``shared_memory_fd`` totals, ``map_count``; ``shm`` where there is no shm
directory; see harness.soak.host.portable).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soakbench.foundation.nvml import NvmlReader, memory_by_pid
from soakbench.harness.soak.host.cgroups import domain_use
from soakbench.harness.soak.host.detail import DETAIL_EVERY, process_detail
from soakbench.harness.soak.host.disk import DiskWatch, watched_paths
from soakbench.harness.soak.host.gpu_watch import GpuWatch
from soakbench.harness.soak.host.interface import PROC_ROOT
from soakbench.harness.soak.host.pressure import HostReader
from soakbench.harness.soak.host.procs import TreeTracker, assign_roles
from soakbench.harness.soak.host.ranks import RankLabels
from soakbench.harness.soak.host.sampling import ProcessSampler
from soakbench.harness.soak.host.shm import shm_usage


@dataclass
class LivenessState:
    """Run-dir liveness: any file under the log dir created, removed, resized or touched counts as change.

    ``last_change`` is the monotonic time of the last sample that saw a change (None before any).
    """

    log_dir: Path
    fingerprint: tuple[int, int, int] = (0, 0, 0)  # (latest mtime ns, file count, total bytes)
    last_change: float | None = None

    @property
    def ever_changed(self) -> bool:
        return self.last_change is not None

    def last_change_mono(self, default: float) -> float:
        return default if self.last_change is None else self.last_change

    def scan(self, now: float) -> dict[str, Any]:
        latest, count, total = 0, 0, 0
        for dirpath, _dirs, files in os.walk(self.log_dir):
            for name in files:
                try:
                    st = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
                except OSError:
                    continue  # removed during the walk (atomic rename temp files)
                latest = max(latest, st.st_mtime_ns)
                count += 1
                total += st.st_size
        fingerprint = (latest, count, total)
        changed = fingerprint != self.fingerprint
        if changed:
            self.fingerprint = fingerprint
            self.last_change = now
        return {"latest_mtime_ns": latest, "file_count": count, "total_bytes": total, "changed": changed}


@dataclass
class ProgressTail:
    """Incremental reader of ``progress.jsonl``: only complete lines are parsed; the last good record is
    kept. A complete line that is not a JSON object is counted in ``parse_errors`` (reported, not fatal:
    the trainer's own schema check owns that file)."""

    path: Path
    offset: int = 0
    pending: bytes = b""
    last: dict[str, Any] | None = None
    records: int = 0
    parse_errors: int = 0

    def poll(self) -> dict[str, Any] | None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return self.last
        self.offset += len(chunk)
        data = self.pending + chunk
        *lines, self.pending = data.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                self.parse_errors += 1
                continue
            if isinstance(record, dict):
                self.last = record
                self.records += 1
            else:
                self.parse_errors += 1
        return self.last


@dataclass
class JobProgress:
    """The progress of a run of one process (``LOG_DIR/progress.jsonl``) or of several ranks
    (``LOG_DIR/rank-<R>/progress.jsonl``, found as the ranks create them).

    ``last`` is the freshest record: the top-level one when there is one, else the rank record with the
    latest ``time``, so progress is stale only when it stops on every rank. ``by_rank`` keeps each
    rank's last record."""

    log_dir: Path
    top: ProgressTail = field(init=False)
    ranks: dict[int, ProgressTail] = field(default_factory=dict)
    last: dict[str, Any] | None = None
    attempt: int = 0  # the latest elastic-restart attempt whose folder was found

    def __post_init__(self) -> None:
        self.top = ProgressTail(self.log_dir / "progress.jsonl")

    @property
    def parse_errors(self) -> int:
        return self.top.parse_errors + sum(t.parse_errors for t in self.ranks.values())

    @property
    def by_rank(self) -> dict[int, dict[str, Any]]:
        return {rank: tail.last for rank, tail in sorted(self.ranks.items()) if tail.last is not None}

    def final_by_rank(self) -> dict[int, dict[str, Any]]:
        """Each rank's last record, read once more after the tree is gone: a rank writes its final
        record moments before it exits, often after the monitor's last sample."""
        self.poll()
        return self.by_rank

    def poll(self, rescan: bool = True) -> dict[str, Any] | None:
        """The freshest record; ``rescan``: look for new rank folders (only worth it when the log dir
        changed since the last poll)."""
        top = self.top.poll()
        if top is None and rescan:
            self._find_ranks()
        for tail in self.ranks.values():
            tail.poll()
        ranked = self.by_rank.values()
        self.last = top if top is not None or not ranked else max(ranked, key=_record_time)
        return self.last

    def _find_ranks(self) -> None:
        """The ranks' progress files: ``rank-<R>/``, and after the N-th elastic restart
        ``attempt-<N>/rank-<R>/`` (a rank's latest attempt is the one read)."""
        latest = max(_numbered(self.log_dir, "attempt"), default=0)
        if latest > self.attempt:
            self.attempt, self.ranks = latest, {}
        attempt_dir = self.log_dir / f"attempt-{self.attempt}" if self.attempt else self.log_dir
        for rank, folder in _numbered(attempt_dir, "rank").items():
            if rank not in self.ranks:
                self.ranks[rank] = ProgressTail(folder / "progress.jsonl")


def _numbered(folder: Path, prefix: str) -> dict[int, Path]:
    """``{N: folder/<prefix>-<N>}`` of the entries there (empty when the folder is not readable)."""
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(prefix + "-")]
    except OSError:
        return {}
    return {int(n.split("-", 1)[1]): folder / n for n in names if n.split("-", 1)[1].isdigit()}


def _record_time(record: dict[str, Any]) -> float:
    value = record.get("time")
    return float(value) if isinstance(value, int | float) else float("-inf")


@dataclass
class Sampler:
    """Takes samples of one run. ``t`` is measured from ``t0`` (monotonic, the spawn time)."""

    reader: ProcessSampler
    tracker: TreeTracker
    log_dir: Path
    t0: float
    nvml: NvmlReader = field(default_factory=NvmlReader)
    host: HostReader = field(default_factory=HostReader)
    gpu: GpuWatch | None = None  # GPU health; None takes no reading
    shm_seen: set[str] = field(default_factory=set)
    shm_before: frozenset[tuple[str, int]] = frozenset()  # (name, inode) in /dev/shm before the spawn
    ranks: RankLabels = field(default_factory=RankLabels)
    watch_paths: tuple[Path, ...] = ()  # folders whose disk use is sampled besides the log dir
    samples_taken: int = 0  # samples taken so far (the detail schedule)
    domain_files: dict[str, Path] = field(default_factory=dict)  # resource -> its domain's usage file
    liveness: LivenessState = field(init=False)
    progress: JobProgress = field(init=False)
    disk: DiskWatch = field(init=False)

    def __post_init__(self) -> None:
        self.liveness = LivenessState(self.log_dir)
        self.progress = JobProgress(self.log_dir)
        self.disk = DiskWatch(watched_paths(self.log_dir, self.watch_paths))

    def _gpu(self) -> tuple[dict[str, Any], dict[int, int | None] | None]:
        snap = self.nvml.snapshot()
        block: dict[str, Any] = {
            "available": snap["available"],
            "reason": snap["reason"],
            "devices": [
                {"index": d["index"], "uuid": d["uuid"], "used_bytes": d["used_bytes"]}
                for d in snap["devices"]
            ],
            "process_memory_reason": None,
        }
        if not snap["available"]:
            block["process_memory_reason"] = "NVML unavailable"
            return block, None
        by_pid = memory_by_pid(snap)
        # NVML reports host-namespace PIDs. If it lists processes and none of them exists in our /proc,
        # we are in another PID namespace and cannot attribute GPU memory to our tree: say so, never 0.
        if by_pid and not any(os.path.exists(f"/proc/{pid}") for pid in by_pid):
            block["process_memory_reason"] = (
                "NVML process PIDs are not visible in this PID namespace; per-process GPU memory unknown"
            )
            return block, None
        return block, by_pid

    def _label_ranks(self, processes: list[dict[str, Any]]) -> None:
        """Tag the processes of a torchrun job's ranks with their rank (only those: a single-rank tree's
        records stay as they were), here and in the tracker's record of every process seen."""
        for proc in processes:
            label = self.ranks.label(proc["pid"], proc["start_ticks"], proc.get("cmdline") or ())
            if label is not None:
                proc["rank"], proc["restart_count"] = label["rank"], label["restart_count"]
                known = self.tracker.known.get((proc["pid"], proc["start_ticks"]))
                if known is None:
                    continue
                known["role"] = proc["role"]  # the latest: a rank names itself trainer after it starts
                if "rank" not in known:  # the label is fixed: record it once
                    fixed = ("rank", "local_rank", "world_size", "restart_count", "run_id", "node_rank")
                    known.update({key: label[key] for key in fixed})

    def _maps_needed(self) -> bool:
        """Whether this sample reads the tree's memory maps. A mapping is evidence only for a ``/dev/shm``
        entry the run may own: one new since the spawn whose name no open fd or earlier mapping of the
        tree explained. While there is none, which is most samples, the maps (the longest per-process
        read) are not read; while one stays unexplained, every sample reads them."""
        root = self.reader.capabilities.shm_root
        if root is None:
            return False
        try:
            entries = {(entry.name, entry.inode()) for entry in os.scandir(root)}
        except OSError:
            return True
        return any(name not in self.shm_seen for name, _ in entries - self.shm_before)

    def _zombies(self) -> list[dict[str, Any]]:
        """The tree's defunct processes at this sample's listing, by pid."""
        found = sorted(self.tracker.zombies, key=lambda st: st.pid)
        return [{"pid": st.pid, "ppid": st.ppid, "name": st.comm} for st in found]

    def _domains(self) -> dict[str, int | None]:
        """Each watched domain's use now (None where its usage file cannot be read)."""
        return {resource: domain_use(resource, path) for resource, path in self.domain_files.items()}

    def _detail_due(self) -> bool:
        """Whether this sample records each process's fds and threads by family (harness.soak.host.detail):
        the first sample and every ``DETAIL_EVERY``-th, on a sampler that reads ``/proc``."""
        due = self.reader.name == "linux" and self.samples_taken % DETAIL_EVERY == 0
        self.samples_taken += 1
        return due

    def sample(self, *, wall: float, now: float) -> dict[str, Any]:
        """One sample record (schema in the module docstring)."""
        started = time.perf_counter()
        members = self.tracker.members(self.reader.all_stats())
        zombies = self._zombies()
        gpu_block, gpu_by_pid = self._gpu()
        maps = self._maps_needed()
        processes = []
        detail = self._detail_due()
        for st in members:
            proc, shm = self.reader.sample_process(st, gpu_by_pid, maps=maps)
            if detail:
                proc["detail"] = process_detail(PROC_ROOT, st.pid)
            processes.append(proc)
            self.shm_seen |= shm
        host = self.host.read(st.pid for st in members)
        assign_roles(processes, self.tracker.root_pid)
        self._label_ranks(processes)
        liveness = self.liveness.scan(now)
        progress = self.progress.poll(rescan=liveness["changed"])
        record: dict[str, Any] = {
            "t": round(now - self.t0, 3),
            "wall": wall,
            "sample_ms": None,  # set last: the whole sample, NVML included
            "processes": processes,
            "totals": self.reader.totals(processes, gpu_by_pid is not None, zombies=len(zombies)),
            "zombies": zombies,
            "shm": shm_usage(self.reader.capabilities.shm_root, self.shm_seen).to_json(),
            "disk": [usage.to_json() for usage in self.disk.sample()],
            **({"domains": self._domains()} if self.domain_files else {}),
            "gpu": gpu_block,
            "host": host,
            "liveness": liveness,
            "progress": progress,
        }
        if self.progress.ranks:  # a job of several ranks: where each rank is (the report plots it)
            record["rank_progress"] = {
                str(rank): {key: last.get(key) for key in ("iteration", "total_env_steps", "env_steps_per_s")}
                for rank, last in self.progress.by_rank.items()
            }
        if self.gpu is not None:
            record["gpu_health"] = self.gpu.sample(now, wall)
        record["sample_ms"] = round((time.perf_counter() - started) * 1000.0, 3)  # GPU health included
        return record
