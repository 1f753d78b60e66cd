"""`soak monitor -- torchrun ...` over a small 2-rank gloo job (slow): a rank that stalls outside any
collective is named as the straggler of the stale tick, with its peer waiting in all_reduce; a rank that
never exits after its final record is named first in the shutdown hang; a rank whose descriptors grow is the
resource leak, and its clean peer is not named; nothing is left either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.soak._soakrun import FAULTS, REPO, SoakOutcome, assert_nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _monitor(tmp: Path, mode: str, *extra: str) -> SoakOutcome:
    log_dir, output = tmp / "run", tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120", "--stale-progress-seconds", "4",
        "--post-shutdown-grace-seconds", "1", "--shutdown-timeout-seconds", "3", "--termination-grace-seconds", "3",
        "--min-duration-seconds", "0", "--live", "plain", "--shm-attribution", "evidence", *extra,
        "--", *TORCHRUN, str(FAULTS / "ranks_job.py"), str(log_dir), mode,
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def test_a_rank_stalled_outside_a_collective_is_named_the_straggler(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "stall")
    art = outcome.artifact
    reason = art["failure_reason"]
    assert art["failure_classification"] == "timeout/stale_tick", (reason, outcome.stderr[-2000:])
    assert "rank 1 is not inside a collective (the straggler; at stall_outside_collective" in reason, reason
    assert "waiting in a collective: rank 0 (all_reduce)" in reason, reason
    assert [r["rank"] for r in art["ranks"]["ranks"]] == [0, 1] and art["ranks"]["agent"] is not None
    assert_nothing_left(outcome)


def test_a_rank_that_never_exits_is_named_in_the_shutdown_hang(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "shutdown_hang")
    art = outcome.artifact
    reason = art["failure_reason"]
    assert art["failure_classification"] == "shutdown_hang", (reason, outcome.stderr[-2000:])
    assert "after the final progress record (post-shutdown grace + shutdown timeout): pid " in reason
    assert reason.split("shutdown timeout): ", 1)[1].startswith("pid ") and ", rank 1)" in reason, reason
    assert "rank 1 is not inside a collective (the straggler; at stall_outside_collective" in reason, reason
    assert_nothing_left(outcome)


def _restarting(tmp: Path, allow: int) -> SoakOutcome:
    tmp.mkdir()
    log_dir, output = tmp / "run", tmp / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120", "--stale-progress-seconds", "30",
        "--min-duration-seconds", "0", "--min-trend-samples", "4", "--live", "off", "--shm-attribution", "evidence",
        "--allow-restarts", str(allow), "--", *TORCHRUN, "--max-restarts", "1",
        str(FAULTS / "ranks_job.py"), str(log_dir), "fail_once",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def test_an_elastic_restart_that_hid_a_crash_fails_unless_allowed(tmp_path: Path) -> None:
    hidden = _restarting(tmp_path / "strict", allow=0)
    art = hidden.artifact
    assert art["trainer_returncode"] == 0  # torchrun restarted the job and it "completed"
    assert art["failure_classification"] == "rank_failure", art["failure_reason"]
    assert art["failure_reason"].startswith(
        "criterion rank_restarts failed: expected <= 0 elastic restart(s)"
    )
    reason = art["failure_reason"]
    if art["oom"]["fork_events"]["used"]:  # the kernel's exit events name the rank that exited first
        assert "; first death: rank 1 pid " in reason and "exit code 1" in reason, reason
    else:  # the rank that exited and the peer it took down went in one sample interval: both are named
        assert "; first death: rank " in reason and "rank 1 pid " in reason, reason
    assert art["ranks"]["restarts"] == 1 and [r["attempts"] for r in art["ranks"]["ranks"]] == [
        [0, 1],
        [0, 1],
    ]
    allowed = _restarting(tmp_path / "lenient", allow=1).artifact
    row = next(c for c in allowed["criteria"] if c["name"] == "rank_restarts")
    assert (row["result"], row["value"]) == ("pass", 1)
    assert allowed["failure_classification"] != "rank_failure"


def test_a_rank_whose_descriptors_grow_is_the_leak_and_its_clean_peer_is_not_named(tmp_path: Path) -> None:
    outcome = _monitor(tmp_path, "leak", "--min-trend-samples", "8")
    art = outcome.artifact
    reason = art["failure_reason"]
    assert art["failure_classification"] == "resource_leak", (reason, outcome.stderr[-2000:])
    leaking = [p for p in art["resource_summary"]["per_process"]["processes"] if p["failing"]]
    assert [(p["rank"], p["failing"]) for p in leaking] == [(1, ["fd_total"])], leaking
    assert f"rank 1 {leaking[0]['role']} (pid {leaking[0]['pid']}): fd_total growing" in reason, reason
    assert "rank 0" not in reason, reason
    by_rank = {r["rank"]: r["leak_verdicts"] for r in art["ranks"]["ranks"]}
    assert by_rank[1]["fd_total"] == "growing" and by_rank[0]["fd_total"] != "growing", by_rank
    assert_nothing_left(outcome)
