"""The job verdict from the artifacts of its nodes (pure), and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from soakbench.foundation.schema import sorted_errors
from soakbench.harness.soak.verdicts.merge import MergeError, merge


def _rank(
    rank: int, node: int, seen: float | None, status: str | None = None, cls: str | None = None
) -> dict[str, Any]:
    return {"rank": rank, "node_rank": node, "status": status, "failure_classification": cls,
            "failure_reason": None if cls is None else f"{cls} of rank {rank}", "last_seen_t": seen}  # fmt: skip


def _node(
    ranks: list[dict[str, Any]], status: str = "passed", run_id: str | None = "job", started: float = 1000.0
) -> dict[str, Any]:
    return {
        "status": status,
        "failure_classification": None if status == "passed" else "rank_failure",
        "failure_reason": None if status == "passed" else "criterion trainer_returncode failed",
        "timing": {"started_at": started},
        "context": {"host": {"hostname": "node-a"}},
        "ranks": {"run_id": run_id, "ranks": ranks},
    }


def test_every_node_passed() -> None:
    verdict = merge([("a.json", _node([_rank(0, 0, 50.0)])), ("b.json", _node([_rank(1, 1, 50.0)]))])
    assert verdict["status"] == "passed" and verdict["first_failure"] is None and verdict["run_id"] == "job"
    assert sorted_errors(verdict, "soak-merge-1.schema.json") == []


def test_the_rank_whose_processes_went_first_is_named_across_nodes_and_clocks() -> None:
    # node b started 10 s later: its rank 1 was last seen at 1010 + 20 = 1030, before rank 0 at 1000 + 31
    a = _node([_rank(0, 0, 31.0)], "failed")
    b = _node([_rank(1, 1, 20.0)], "failed", started=1010.0)
    verdict = merge([("a.json", a), ("b.json", b)])
    first = verdict["first_failure"]
    assert (first["artifact"], first["node_rank"], first["rank"]) == ("b.json", 1, 1)
    assert verdict["failure_reason"].startswith("node 1 (node-a, b.json), rank 1 failed first")
    assert sorted_errors(verdict, "soak-merge-1.schema.json") == []


def test_a_ranks_own_failure_beats_an_earlier_consequence() -> None:
    a = _node([_rank(0, 0, 10.0, "failed", "peer_failure")], "failed")
    b = _node([_rank(1, 1, 12.0, "failed", "learner_failure")], "failed")
    assert merge([("a.json", a), ("b.json", b)])["first_failure"]["rank"] == 1


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([("a.json", _node([_rank(0, 0, 1.0)]))], "at least 2 nodes"),
        ([("a.json", _node([_rank(0, 0, 1.0)])), ("b.json", _node([_rank(1, 1, 1.0)], run_id="other"))],
         "different runs"),
        ([("a.json", _node([_rank(0, 0, 1.0)])), ("b.json", _node([_rank(1, 1, 1.0)], run_id=None))],
         "no TORCHELASTIC_RUN_ID"),
        ([("a.json", _node([_rank(0, 0, 1.0)])), ("b.json", {"status": "passed"})], "no ranks section"),
        ([("a.json", _node([_rank(0, 0, 1.0)])), ("a2.json", _node([_rank(0, 0, 1.0)]))], "rank 0 is in both"),
    ],
)  # fmt: skip
def test_artifacts_that_are_not_one_jobs_nodes_are_refused(nodes: list[Any], message: str) -> None:
    with pytest.raises(MergeError, match=message):
        merge(nodes)


def test_a_node_that_could_not_decide_its_survival_target_leaves_the_job_inconclusive() -> None:
    undecided = {**_node([_rank(1, 1, 50.0)]), "status": "inconclusive"}
    undecided["failure_reason"] = "criterion survival inconclusive: fds of pid 7 (collector): inconclusive"
    verdict = merge([("a.json", _node([_rank(0, 0, 50.0)])), ("b.json", undecided)])
    assert verdict["status"] == "inconclusive" and verdict["first_failure"] is None
    assert verdict["failure_reason"].startswith("b.json: criterion survival inconclusive")
    assert sorted_errors(verdict, "soak-merge-1.schema.json") == []
    failing = merge(
        [("a.json", _node([_rank(0, 0, 50.0, "failed", "rank_failure")], "failed")), ("b.json", undecided)]
    )
    assert failing["status"] == "failed"  # a failure outranks an undecided node
