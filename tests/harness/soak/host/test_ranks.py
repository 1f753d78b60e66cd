"""Rank labels from a process's environment, and the progress of a job read rank by rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.soak.host.ranks import RankLabels, rank_label
from harness.soak.host.sampler import JobProgress

WORKER = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "TORCHELASTIC_RUN_ID": "job-7",
    "TORCHELASTIC_RESTART_COUNT": "2",
}


def test_a_torchrun_worker_is_labelled_with_its_rank_and_attempt() -> None:
    assert rank_label(WORKER | {"GROUP_RANK": "1"}) == {
        "rank": 1,
        "local_rank": 1,
        "world_size": 2,
        "restart_count": 2,
        "node_rank": 1,
        "run_id": "job-7",
    }


def test_processes_outside_a_job_of_ranks_have_no_label() -> None:
    assert rank_label({}) is None  # the torchrun agent, or any other process
    assert rank_label(WORKER | {"WORLD_SIZE": "1"}) is None
    assert rank_label(WORKER | {"RANK": "one"}) is None


def test_a_real_process_environment_is_read_once_per_identity() -> None:
    env = dict(os.environ, **WORKER)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        ticks = int(psutil.Process(child.pid).create_time() * 100)  # any stable key works for the cache
        labels = RankLabels()
        assert labels.label(child.pid, ticks) == rank_label(WORKER)
        assert labels.label(os.getpid(), 0) == rank_label(dict(os.environ))
    finally:
        child.kill()
        child.wait()
    assert labels.label(child.pid, ticks) == rank_label(WORKER)  # the cache: the process is gone


def _write(path: Path, *records: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")


def test_job_progress_is_fresh_while_any_rank_moves_and_keeps_each_ranks_last(tmp_path: Path) -> None:
    progress = JobProgress(tmp_path)
    assert progress.poll() is None
    now = time.time()
    _write(tmp_path / "rank-0" / "progress.jsonl", {"time": now, "iteration": 5})
    _write(tmp_path / "rank-1" / "progress.jsonl", {"time": now + 1, "iteration": 4})
    (tmp_path / "rank-x").mkdir()  # not a rank's folder
    assert progress.poll() == {"time": now + 1, "iteration": 4}
    _write(tmp_path / "rank-0" / "progress.jsonl", {"time": now + 2, "iteration": 6})
    with (tmp_path / "rank-1" / "progress.jsonl").open("a") as fh:
        fh.write("not json\n")
    assert progress.poll() == {"time": now + 2, "iteration": 6}
    assert progress.by_rank[1] == {"time": now + 1, "iteration": 4}  # rank 1 stalled: rank 0 still moves
    assert progress.parse_errors == 1


def test_a_single_process_run_reads_only_its_own_progress(tmp_path: Path) -> None:
    _write(tmp_path / "progress.jsonl", {"time": 1.0, "iteration": 1})
    _write(tmp_path / "rank-0" / "progress.jsonl", {"time": 9.0, "iteration": 9})
    progress = JobProgress(tmp_path)
    assert progress.poll() == {"time": 1.0, "iteration": 1}
    assert progress.by_rank == {}


def test_after_an_elastic_restart_each_ranks_latest_attempt_is_read(tmp_path: Path) -> None:
    _write(tmp_path / "rank-1" / "progress.jsonl", {"time": 5.0, "iteration": 40})
    progress = JobProgress(tmp_path)
    assert progress.poll() == {"time": 5.0, "iteration": 40}
    _write(tmp_path / "attempt-1" / "rank-1" / "progress.jsonl", {"time": 9.0, "iteration": 2})
    assert progress.poll() == {"time": 9.0, "iteration": 2}
    assert progress.by_rank == {1: {"time": 9.0, "iteration": 2}} and progress.attempt == 1
