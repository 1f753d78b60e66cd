"""`soak run --nproc-per-node 2` on the real CPU trainer under torchrun (slow): a clean 2-rank soak passes
with each rank in the artifact; a rank that fails is a rank_failure naming it, not the peer it took down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.harness.soak.evidence.artifact import validation_errors
from tests.harness.soak._soakrun import REPO, SoakOutcome, assert_nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]


def _soak(tmp: Path, *extra: str) -> SoakOutcome:
    output = tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "run", "--nproc-per-node", "2",
        "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco", "--num-envs", "8", "--iterations", "300",
        "--min-duration-seconds", "1", "--sample-interval-seconds", "0.25", "--min-trend-samples", "8",
        "--startup-timeout-seconds", "240", "--stale-progress-seconds", "120",
        "--post-shutdown-grace-seconds", "5", "--shm-attribution", "evidence", "--live", "plain",
        "--extra-override", "algo.prefill_iterations=4", "--extra-override", "algo.batch_size=32",
        "--extra-override", "algo.learning_starts=32", "--extra-override", "algo.updates_per_iteration=1",
        *extra, "--log-dir", str(tmp / "run"), "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="soak", ranks=2)
def test_a_clean_two_rank_soak_passes_with_every_rank_in_the_artifact(tmp_path: Path) -> None:
    outcome = _soak(tmp_path)
    art = outcome.artifact
    assert outcome.returncode == 0, (art["failure_reason"], outcome.stderr[-3000:])
    assert validation_errors(art) == []
    assert art["run_settings"]["nproc_per_node"] == 2 and "torch.distributed.run" in art["command"]
    ranks = art["ranks"]
    assert (
        ranks["world_size"] == 2 and ranks["agent"]["role"] == "agent" and ranks["params_identical"] is True
    )
    for rank, entry in enumerate(ranks["ranks"]):
        assert entry["rank"] == rank and entry["status"] == "completed" and entry["attempts"] == [0]
        assert {f"rank {rank} trainer", f"rank {rank} collector"} <= {p["role"] for p in entry["processes"]}
        assert entry["last_progress"]["final"] is True and entry["last_progress"]["iteration"] == 300
    page = outcome.output.with_suffix(".html").read_text()
    assert 'data-rank="0"' in page and 'data-rank="1"' in page and 'id="rank-progress"' in page
    assert_nothing_left(outcome)


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault", ranks=2)
def test_a_rank_that_fails_is_a_rank_failure_naming_that_rank(tmp_path: Path) -> None:
    fault = [
        "training.test_fault=learner_exception",
        "training.test_fault_iteration=20",
        "training.test_fault_rank=1",
    ]
    outcome = _soak(tmp_path, *(arg for item in fault for arg in ("--extra-override", item)))
    art = outcome.artifact
    seen = (art["failure_reason"], art.get("ranks"), outcome.stderr[-2000:])
    assert outcome.returncode == 1, seen
    assert art["failure_classification"] == "rank_failure", seen
    assert "; rank 1: injected learner exception at iteration 20" in art["failure_reason"], seen
    survivor, failed = art["ranks"]["ranks"]
    assert failed["failure_classification"] == "learner_failure", seen
    assert survivor["failure_classification"] in ("peer_failure", "external_cancellation"), seen
    assert art["ranks"]["first_failure"].startswith("rank 1: ")
    page = outcome.output.with_suffix(".html").read_text()
    assert 'id="rank-first-failure">First failure: rank 1: injected' in page
    assert_nothing_left(outcome)
