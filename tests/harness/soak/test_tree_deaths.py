"""A death in the tree is never silent (slow, real processes): a worker SIGKILLed while its root carries on
and exits 0 fails the run, named with its pid and role, unless its role is declared allowed."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.harness.soak._soakrun import REPO, SoakOutcome, assert_nothing_left, monitor_args

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]


def _run(tmp_path, *extra: str) -> tuple[dict, int]:
    argv, output = monitor_args(
        tmp_path, "survives_killed_worker.py", "4", startup=30.0, stale=10.0, extra=extra
    )
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    outcome = SoakOutcome(done.returncode, done.stdout, done.stderr, output)
    assert_nothing_left(outcome)
    worker = json.loads((tmp_path / "run" / "worker.json").read_text())["pid"]
    return outcome.artifact, worker


def _row(artifact: dict) -> dict:
    return next(c for c in artifact["criteria"] if c["name"] == "tree_deaths")


def test_a_worker_killed_while_the_root_exits_zero_fails_the_run_naming_it(tmp_path) -> None:
    artifact, worker = _run(tmp_path)
    assert artifact["trainer_returncode"] == 0
    if not artifact["oom"]["fork_events"]["used"]:
        pytest.skip(f"no process-events connector here: {artifact['oom']['fork_events']['reason']}")
    row = _row(artifact)
    assert row["result"] == "fail", row
    assert any(f"pid {worker} (collector) killed by SIGKILL" in death for death in row["value"]), row
    assert artifact["status"] == "failed"
    assert artifact["failure_classification"] == "tree_process_killed"
    assert f"pid {worker} (collector) killed by SIGKILL" in artifact["failure_reason"]
    exits = {e["pid"]: e for e in artifact["tree_exits"]["exits"]}
    assert exits[worker]["returncode"] == -9 and exits[worker]["seen_by"] == "kernel"


def test_a_declared_allowed_role_may_die_by_a_signal(tmp_path) -> None:
    artifact, worker = _run(tmp_path, "--allow-signal-death", "collector")
    if not artifact["oom"]["fork_events"]["used"]:
        pytest.skip(f"no process-events connector here: {artifact['oom']['fork_events']['reason']}")
    assert _row(artifact)["result"] == "pass"
    assert artifact["tree_exits"]["allowed_roles"] == ["collector"]
    assert any(e["pid"] == worker and e["returncode"] == -9 for e in artifact["tree_exits"]["exits"])
