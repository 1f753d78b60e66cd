"""The artifact's ranks section from what the monitor recorded and the job summary (pure)."""

from __future__ import annotations

from typing import Any

from soakbench.harness.soak.verdicts.evaluation import MonitorObservation
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.per_process import PerProcessVerdicts, ProcessVerdict
from soakbench.harness.soak.verdicts.ranks import JobTree, ranks_section, straggler_sentence
from soakbench.harness.soak.verdicts.trends import LeakTrends
from tests.harness.soak._observations import split

AGENT = {"pid": 10, "start_ticks": 1, "name": "python"}


def _proc(pid: int, rank: int, role: str, attempt: int = 0) -> dict[str, Any]:
    return {"pid": pid, "start_ticks": 2, "name": "python", "rank": rank, "restart_count": attempt,
            "run_id": "job", "role": role}  # fmt: skip


KNOWN = [
    AGENT,
    _proc(11, 0, "trainer"),
    _proc(12, 1, "trainer"),
    _proc(13, 1, "collector"),
    _proc(14, 1, "trainer", 1),
]


def _judged(pid: int, verdicts: dict[str, str]) -> ProcessVerdict:
    return ProcessVerdict(pid=pid, start_ticks=2, role="other", name="python", command=(), first_t=0.0, last_t=1.0,
                          lifetime_s=1.0, samples=2, window_coverage=1.0, judged=True, peaks={},
                          leak_verdicts=verdicts, growing=(), failing=(), trends={})  # fmt: skip


PER_PROCESS = PerProcessVerdicts(
    min_window_coverage=0.5,
    window=None,
    judged_classes=("pss", "fd_total"),
    processes=(
        _judged(12, {"pss": "bounded", "fd_total": "bounded"}),
        _judged(13, {"pss": "growing", "fd_total": "insufficient_data"}),
        _judged(11, {"pss": "bounded"}),
    ),
    omitted=0,
)


def _obs(summary: dict[str, Any] | None, restarts: int | None = None) -> tuple[MonitorObservation, Gates]:
    return split(
        mode="monitor", monitor_failure=None, trainer_returncode=0, run_summary=summary, residual_processes=[],
        orphaned_shm_segments=[], leak_verdicts=LeakTrends.of_verdicts({}), duration_s=1.0, min_duration_s=0.0, per_process=PER_PROCESS,
        rank_restarts=restarts, allow_restarts=2,
    )  # fmt: skip


def test_a_single_process_run_has_no_ranks_section() -> None:
    assert (
        ranks_section(
            *_obs({"status": "completed"}),
            JobTree(known_processes=[AGENT], rank_progress={}, last_seen={}, root_pid=10),
        )
        is None
    )


def test_each_rank_with_its_processes_attempts_progress_and_worst_verdicts() -> None:
    progress = {
        1: {"iteration": 7, "total_env_steps": 56, "env_steps_per_s": 3.5, "phase": "train", "time": 1.0}
    }
    section = ranks_section(
        *_obs(None, restarts=1),
        JobTree(known_processes=KNOWN, rank_progress=progress, last_seen={1: 7.5}, root_pid=10),
    )
    assert section is not None
    assert section["agent"] == {**AGENT, "role": "agent"} and section["run_id"] == "job"
    assert section["world_size"] == 2 and section["first_failure"] is None
    rank0, rank1 = section["ranks"]
    assert [p["role"] for p in rank1["processes"]] == ["rank 1 trainer", "rank 1 collector", "rank 1 trainer"]
    assert rank1["attempts"] == [0, 1]
    assert rank1["leak_verdicts"] == {"pss": "growing", "fd_total": "insufficient_data"}  # not rank 0's
    assert rank0["leak_verdicts"] == {"pss": "bounded"}
    assert rank1["last_progress"]["iteration"] == 7 and rank0["last_progress"] is None
    assert (rank1["last_seen_t"], rank0["last_seen_t"]) == (7.5, None)
    assert (section["restarts"], section["allowed_restarts"]) == (1, 2)
    assert rank1["status"] is None  # no job summary: nothing claimed


def test_the_job_summary_gives_each_ranks_end_and_the_first_failure() -> None:
    summary = {
        "status": "failed",
        "failure_reason": "rank 1: ValueError: nan",
        "distributed": {
            "world_size": 2, "run_id": "job", "params_identical": None,
            "ranks": [
                {"rank": 0, "status": "failed", "failure_classification": "peer_failure", "failure_reason": "x",
                 "exit_code": 1, "params_checksum": None},
                {"rank": 1, "status": "failed", "failure_classification": "learner_failure",
                 "failure_reason": "ValueError: nan", "exit_code": 1, "params_checksum": None},
            ],
        },
    }  # fmt: skip
    section = ranks_section(
        *_obs(summary), JobTree(known_processes=KNOWN, rank_progress={}, last_seen={}, root_pid=10)
    )
    assert section is not None and section["first_failure"] == "rank 1: ValueError: nan"
    assert [r["failure_classification"] for r in section["ranks"]] == ["peer_failure", "learner_failure"]


def test_each_process_of_a_rank_has_the_exit_the_kernel_reported_and_one_node_knows_the_world() -> None:
    # one node of a 4-rank job: it sees ranks 0 and 1 only
    known = [AGENT, *({**p, "world_size": 4} for p in KNOWN)]
    ended = {(11, 2): {"returncode": 1, "exited_t": 4.0}, (12, 2): {"returncode": -9, "exited_t": 3.5}}
    section = ranks_section(
        *_obs(None), JobTree(known_processes=known, rank_progress={}, last_seen={}, root_pid=10, ended=ended)
    )
    assert section is not None and section["world_size"] == 4
    rank0, rank1 = section["ranks"]
    assert (rank0["processes"][0]["returncode"], rank0["processes"][0]["exited_t"]) == (1, 4.0)
    ends = {p["pid"]: p.get("returncode") for p in rank1["processes"]}
    assert ends == {12: -9, 13: None, 14: None}
    assert "returncode" not in (section["agent"] or {})
    without = ranks_section(
        *_obs(None), JobTree(known_processes=KNOWN, rank_progress={}, last_seen={}, root_pid=10)
    )
    assert without is not None and without["world_size"] == 2  # no WORLD_SIZE read: the ranks seen
    assert all("returncode" not in p for r in without["ranks"] for p in r["processes"])


def _captured(pid: int, *functions: tuple[str, str]) -> dict[str, Any]:
    frames = [{"function": f, "file": path, "line": 3, "project": "faults" in path} for f, path in functions]
    return {"pid": pid, "start_ticks": 2, "stack": {"status": "captured", "threads": [{"frames": frames}]}}


def test_the_rank_outside_every_collective_is_the_straggler() -> None:
    waiting = _captured(
        11, ("all_reduce", "/x/torch/distributed/distributed_c10d.py"), ("main", "/r/train.py")
    )
    stalled = _captured(12, ("sleep", "/usr/lib/time.py"), ("stall", "/r/faults/job.py"))
    collector = _captured(13, ("recv", "/usr/lib/multiprocessing/connection.py"))  # not torch.distributed
    sentence = straggler_sentence([{"processes": [waiting, stalled, collector]}], KNOWN)
    assert sentence == (
        "rank 1 is not inside a collective (the straggler; at stall (/r/faults/job.py:3)); "
        "waiting in a collective: rank 0 (all_reduce)"
    )
    assert straggler_sentence([], KNOWN) is None
