"""Two torchrun agents (``--nnodes 2``, c10d rendezvous on localhost), each under its own `soak monitor`,
and `soak merge` of their artifacts (slow, real processes): it names the node and the rank that failed
first, and refuses artifacts of different runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from torch.distributed.elastic.utils.distributed import get_free_port

from soakbench.foundation.schema import sorted_errors
from tests.harness.soak._soakrun import FAULTS, REPO, SoakOutcome, assert_nothing_left

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.linux_only]


def _node(tmp: Path, name: str, port: int, run_id: str) -> tuple[subprocess.Popen[str], Path]:
    log_dir, output = tmp / f"run-{name}", tmp / f"{name}.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
        "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120", "--stale-progress-seconds", "60",
        "--min-duration-seconds", "0", "--live", "off", "--shm-attribution", "evidence", "--",
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
        str(FAULTS / "ranks_job.py"), str(log_dir), "run",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, output


def _rank_process(output: Path, timeout_s: float = 120.0) -> dict[str, Any]:
    """The rank process of a node once its samples show one."""
    samples = output.with_name(output.stem + ".samples.jsonl")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = samples.read_text().splitlines() if samples.exists() else []
        if len(lines) >= 2:  # the last line may still be being written: read the one before it
            ranked = [p for p in json.loads(lines[-2])["processes"] if "rank" in p]
            if ranked:
                return min(ranked, key=lambda p: p["pid"])
        time.sleep(0.25)
    raise AssertionError(f"no rank process appeared in {samples}")


def test_merge_names_the_node_and_rank_that_failed_first(tmp_path: Path) -> None:
    port = get_free_port()
    nodes = [_node(tmp_path, name, port, "merge-job") for name in ("a", "b")]
    _rank_process(nodes[0][1])
    victim = _rank_process(nodes[1][1])
    time.sleep(2.0)  # both ranks all-reduce for a while
    os.kill(victim["pid"], signal.SIGKILL)
    outcomes = []
    for proc, output in nodes:
        stdout, stderr = proc.communicate(timeout=180)
        outcomes.append(SoakOutcome(proc.returncode, stdout, stderr, output))
    merged = tmp_path / "merged.json"
    argv = [
        sys.executable,
        "-m",
        "soakbench.harness.soak.cli",
        "merge",
        str(nodes[0][1]),
        str(nodes[1][1]),
        "--output",
        str(merged),
    ]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    verdict = json.loads(merged.read_text())
    assert sorted_errors(verdict, "soak-merge-1.schema.json") == []
    first = verdict["first_failure"]
    assert (first["artifact"], first["rank"]) == (str(nodes[1][1]), victim["rank"]), verdict
    assert f"rank {victim['rank']} failed first (its processes were the first to go)" in done.stdout
    for outcome in outcomes:
        assert outcome.artifact["ranks"]["world_size"] == 2  # each node sees one rank of the two
        assert_nothing_left(outcome)


def test_merge_refuses_artifacts_of_different_runs(tmp_path: Path) -> None:
    artifacts = []
    for run in ("run-one", "run-two"):  # two separate jobs (standalone: each its own random run id)
        log_dir, output = tmp_path / f"log-{run}", tmp_path / f"{run}.json"
        argv = [
            sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--log-dir", str(log_dir), "--output", str(output),
            "--sample-interval-seconds", "0.25", "--min-duration-seconds", "0", "--live", "off",
            "--shm-attribution", "evidence", "--",
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            str(FAULTS / "ranks_job.py"), str(log_dir), "short",
        ]  # fmt: skip
        subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=180, check=False)
        artifacts.append(str(output))
    done = subprocess.run([sys.executable, "-m", "soakbench.harness.soak.cli", "merge", *artifacts], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert "the artifacts are of different runs (TORCHELASTIC_RUN_ID)" in " ".join(done.stderr.split())
