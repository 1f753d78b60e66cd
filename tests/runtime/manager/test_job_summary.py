"""The job summary rank 0 composes: the job's status, and the first failing rank named (pure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soakbench.runtime.distributed import RankIdentity
from soakbench.runtime.manager.job_summary import job_summary, rank_block, read_rank_summaries

CHECKSUM = "sha256:" + "ab" * 32


def _summary(
    rank: int,
    status: str = "completed",
    cls: str | None = None,
    reason: str | None = None,
    finished: float = 100.0,
    checksum: str | None = CHECKSUM,
) -> dict[str, Any]:
    identity = RankIdentity(
        rank=rank, local_rank=rank, world_size=3, local_world_size=3, run_id="r", restart_count=0
    )
    return {
        "status": status,
        "failure_classification": cls,
        "failure_reason": reason,
        "exit_code": 0 if status == "completed" else (143 if status == "cancelled" else 1),
        "total_env_steps": 64,
        "finished_unix_s": finished,
        "distributed": rank_block(identity, "gloo", checksum),
    }


def test_every_rank_completed_with_equal_parameters() -> None:
    ranks = {r: _summary(r) for r in range(3)}
    out = job_summary(ranks[0], ranks)
    assert out["status"] == "completed" and out["failure_reason"] is None
    assert [e["rank"] for e in out["distributed"]["ranks"]] == [0, 1, 2]
    assert out["distributed"]["params_identical"] is True
    assert ranks[0]["distributed"].get("ranks") is None  # the rank's own summary is left as it was


def test_different_parameters_are_reported_not_hidden() -> None:
    ranks = {0: _summary(0), 1: _summary(1, checksum="sha256:" + "cd" * 32), 2: _summary(2)}
    assert job_summary(ranks[0], ranks)["distributed"]["params_identical"] is False


def test_the_first_rank_to_fail_on_its_own_is_named_not_the_survivors() -> None:
    ranks = {
        0: _summary(
            0, "failed", "peer_failure", "all_reduce failed: Connection closed by peer", finished=103.0
        ),
        1: _summary(1, "failed", "collector_failure", "collector died of SIGKILL", finished=102.0),
        2: _summary(2, "failed", "learner_failure", "ValueError: nan", finished=101.0),
    }
    out = job_summary(ranks[0], ranks)
    assert out["status"] == "failed"
    assert out["failure_classification"] == "learner_failure"
    assert out["failure_reason"] == "rank 2: ValueError: nan"
    assert out["exit_code"] == 1


def test_a_rank_killed_before_writing_is_the_peer_failure_of_the_job() -> None:
    ranks: dict[int, dict[str, Any] | None] = {
        0: _summary(0, "failed", "peer_failure", "all_reduce failed", checksum=None),
        1: None,
        2: _summary(2, "cancelled", "external_cancellation", "received SIGTERM", checksum=None),
    }
    out = job_summary(ranks[0], ranks)  # type: ignore[arg-type]
    assert out["failure_classification"] == "peer_failure"
    assert out["failure_reason"].startswith("rank 1 left no run summary")
    assert out["distributed"]["ranks"][1]["status"] == "missing"
    assert out["distributed"]["params_identical"] is None


def test_a_job_stopped_from_outside_is_cancelled() -> None:
    stop = "received SIGTERM"
    ranks = {r: _summary(r, "cancelled", "external_cancellation", stop, checksum=None) for r in range(3)}
    out = job_summary(ranks[0], ranks)
    assert (out["status"], out["failure_classification"], out["exit_code"]) == (
        "cancelled",
        "external_cancellation",
        143,
    )


def _valid_summary(rank: int) -> dict[str, Any]:
    """A schema-valid run summary of ``rank`` (the soak fixtures' completed one, with its rank block)."""
    fixture = Path(__file__).parents[2] / "harness" / "soak" / "fixtures" / "run_summary_completed.json"
    return json.loads(fixture.read_text()) | {"distributed": _summary(rank)["distributed"]}


def test_rank_summaries_are_awaited_until_the_deadline(tmp_path: Path) -> None:
    for rank, text in ((1, json.dumps(_valid_summary(1))), (2, "[1, 2]"), (3, "{}")):
        (tmp_path / f"rank-{rank}").mkdir()
        (tmp_path / f"rank-{rank}" / "run_summary.json").write_text(text)  # ranks 2 and 3: not summaries
    own = {0: _valid_summary(0)}
    found = read_rank_summaries(tmp_path, 5, deadline_s=0.3, poll_s=0.05, own=own)
    assert found[0] is own[0]  # the caller's own summary, not read again
    assert found[2] is None and found[3] is None and found[4] is None
    assert found[1] is not None and found[1]["distributed"]["rank"] == 1
    assert job_summary(own[0], found)["distributed"]["ranks"][3]["status"] == "missing"  # no KeyError
