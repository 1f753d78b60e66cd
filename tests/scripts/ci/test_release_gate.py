"""docs/ci.md's release gate, run here as CI runs it: `CI=true`, `GITHUB_STEP_SUMMARY` set, at CPU sizes,
against a base commit of a scratch evidence repository that files a probe taken on this host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
GATE = REPO / "scripts" / "ci" / "release_gate.sh"
PROBE = ["--backends", "mujoco", "--task", "g1_walk_flat", "--num-envs", "32", "--warmup", "3",
         "--iters", "10", "--rounds", "2", "--processes", "2"]  # fmt: skip
SIZES = {
    "ALGO": "sac", "TASK": "g1_walk_flat", "SIM": "mujoco", "PLATFORM": "linux-cpu",
    "NUM_ENVS": "16", "ITERATIONS": "400", "MIN_DURATION": "5", "SAMPLE_INTERVAL": "0.5",
    "MIN_TREND_SAMPLES": "8", "PROGRESS_EVERY": "30",
    "PROBE_ENVS": "32", "PROBE_WARMUP": "3", "PROBE_ITERS": "10", "PROBE_ROUNDS": "2", "PROBE_PROCESSES": "2",
}  # fmt: skip

pytestmark = [pytest.mark.slow, pytest.mark.linux_only]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _base_commit(tmp: Path) -> tuple[Path, str]:
    """A scratch repository whose HEAD files one probe of the gate's workload, taken here and now."""
    probe = tmp / "base-probe-run.json"
    subprocess.run(
        [sys.executable, "-m", "soakbench.harness.probe", *PROBE, "--output", str(probe)],
        cwd=REPO,
        check=True,
        timeout=300,
    )
    repo = tmp / "evidence"
    rel = "matrix/evidence/probe/probe-base.json"
    (repo / rel).parent.mkdir(parents=True)
    shutil.copy(probe, repo / rel)
    index = {"entries": [{"file": rel, "kind": "probe", "platform": "linux-cpu"}]}
    (repo / "matrix" / "evidence" / "index.json").write_text(json.dumps(index))
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "add", "-A")
    _git(repo, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-qm", "file a probe")
    return repo, _git(repo, "rev-parse", "HEAD")


def _failures(path: Path) -> list[str]:
    return [
        str(c.get("name")) for c in ET.parse(path).getroot().iter("testcase") if c.find("failure") is not None
    ]


def test_the_release_gate_runs_as_ci_runs_it(tmp_path: Path) -> None:
    evidence, base = _base_commit(tmp_path)
    out, step = tmp_path / "out", tmp_path / "step_summary"
    step.write_text("")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        **SIZES, "CI": "true", "GITHUB_STEP_SUMMARY": str(step), "BASE_SHA": base, "OUT": str(out),
        "EVIDENCE_REPO": str(evidence),
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(GATE)], env=env, capture_output=True, text=True, timeout=900, check=False
    )
    log = done.stdout[-3000:] + done.stderr[-3000:]
    soak_failed, compare_failed = _failures(out / "soak.xml"), _failures(out / "probe-compare.xml")
    # the exit status says exactly what the verdicts say
    assert done.returncode == (1 if soak_failed or compare_failed else 0), log
    assert json.loads((out / "soak.json").read_text())["status"] == ("failed" if soak_failed else "passed")
    assert (out / "soak.html").is_file() and (out / "probe.bmf.json").is_file()
    assert json.loads((out / "probe-compare.json").read_text())["kind"] == "soakbench.probe-compare"
    summary = step.read_text()
    assert "soak run sac/g1_walk_flat/mujoco" in summary and "probe compare" in summary
    assert summary.index("soak run") < summary.index("probe compare")  # appended in order
    assert not (out / "soak.md").exists()  # the step summary collected them
    progress = [line for line in done.stderr.splitlines() if line.startswith("[soak] t=")]
    duration = json.loads((out / "soak.json").read_text())["timing"]["duration_s"]
    assert 1 <= len(progress) <= duration / 30 + 2, progress  # --quiet-progress: one line per 30 s


def test_the_gate_refuses_an_output_folder_in_use(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "soak.json").write_text("{}")
    env = {**os.environ, "BASE_SHA": "HEAD", "OUT": str(out)}
    done = subprocess.run(
        ["bash", str(GATE)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "is not empty" in done.stderr
