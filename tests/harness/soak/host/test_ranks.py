"""Rank labels from a process's environment, and the progress of a job read rank by rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from soakbench.harness.soak.host.ranks import RankLabels, rank_label
from soakbench.harness.soak.host.sampler import JobProgress

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


SLEEPER = "import time; time.sleep(30)"


def _execed(pid: int) -> list[str]:
    """The command line of ``pid`` once it has exec'd the sleeper (before that it is its parent's)."""
    proc, deadline = psutil.Process(pid), time.monotonic() + 20
    while proc.cmdline()[-1:] != [SLEEPER]:
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.02)
    return proc.cmdline()


def test_a_real_process_environment_is_read_once_per_identity() -> None:
    env = dict(os.environ, **WORKER)
    plain = {k: v for k, v in os.environ.items() if k not in WORKER}
    child = subprocess.Popen([sys.executable, "-c", SLEEPER], env=env)
    other = subprocess.Popen([sys.executable, "-c", SLEEPER], env=plain)
    try:
        ticks = int(psutil.Process(child.pid).create_time() * 100)  # any stable key works for the cache
        labels = RankLabels()
        argv = _execed(child.pid)
        assert labels.label(child.pid, ticks, argv) == rank_label(WORKER)
        assert labels.label(other.pid, ticks, _execed(other.pid)) is None  # its own environment, not ours
    finally:
        for proc in (child, other):
            proc.kill()
            proc.wait()
    assert labels.label(child.pid, ticks, argv) == rank_label(WORKER)  # the cache: the process is gone


EXEC_LATER = (
    "import os, sys, time\n"
    "time.sleep(1.0)\n"
    f"os.execve(sys.executable, [sys.executable, '-c', {SLEEPER!r}], dict(os.environ, **{{0!r}}))"
)


def test_a_worker_sampled_before_its_exec_is_read_again_after_it() -> None:
    plain = {k: v for k, v in os.environ.items() if k not in WORKER}
    child = subprocess.Popen([sys.executable, "-c", EXEC_LATER.format(WORKER)], env=plain)
    try:
        proc = psutil.Process(child.pid)
        labels = RankLabels()
        assert labels.label(child.pid, 7, proc.cmdline()) is None  # still the launcher's environment
        _execed(child.pid)
        assert labels.label(child.pid, 7, proc.cmdline()) == rank_label(WORKER)
    finally:
        child.kill()
        child.wait()


def test_an_exiting_rank_keeps_its_label_when_its_command_line_reads_empty() -> None:
    child = subprocess.Popen([sys.executable, "-c", SLEEPER], env=dict(os.environ, **WORKER))
    try:
        labels = RankLabels()
        argv = _execed(child.pid)
        assert labels.label(child.pid, 7, argv) == rank_label(WORKER)
    finally:
        child.kill()
        child.wait()
    # an exiting process has given its memory back: argv and environment read empty
    assert labels.label(child.pid, 7, []) == rank_label(WORKER)
    assert labels.label(child.pid, 8, []) is None  # another process: never labelled before


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


def test_a_ranks_final_record_written_after_the_last_poll_is_read_at_the_end(tmp_path: Path) -> None:
    """A clean 2-rank soak once reported a rank's last progress short of its final record: the record
    landed after the last sample and the job exited before the next one."""
    progress = JobProgress(tmp_path)
    _write(tmp_path / "rank-0" / "progress.jsonl", {"time": 1.0, "iteration": 299})
    _write(tmp_path / "rank-1" / "progress.jsonl", {"time": 1.0, "iteration": 299})
    assert progress.poll() is not None  # the last sample of the run
    for rank in (0, 1):
        _write(tmp_path / f"rank-{rank}" / "progress.jsonl", {"time": 2.0, "iteration": 300, "final": True})
    assert progress.by_rank[0]["iteration"] == 299  # what the last sample saw
    final = progress.final_by_rank()
    assert final == {r: {"time": 2.0, "iteration": 300, "final": True} for r in (0, 1)}


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
