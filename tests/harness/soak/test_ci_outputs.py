"""`soak monitor` over real programs writes what CI reads: JUnit XML (read back with ElementTree, not the
library that wrote it), the Markdown summary, and quiet progress lines."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.harness.soak._soakrun import REPO, SoakOutcome, monitor_args

pytestmark = [pytest.mark.soak, pytest.mark.linux_only]


def _run(tmp: Path, program: str, *args: str, extra: tuple[str, ...], env: dict[str, str]) -> SoakOutcome:
    argv, output = monitor_args(tmp, program, *args, extra=extra)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    done = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env={**clean, **env}
    )
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def _failures(path: Path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {
        str(case.get("name")): str(failure.get("message"))
        for case in root.iter("testcase")
        for failure in case.findall("failure")
    }


def test_a_clean_soak_gives_junit_with_no_failure_and_a_passing_summary(tmp_path: Path) -> None:
    junit, summary = tmp_path / "soak.xml", tmp_path / "summary.md"
    outcome = _run(
        tmp_path,
        "healthy_plateau.py",
        "6",
        extra=("--junit-xml", str(junit), "--summary-md", str(summary)),
        env={},
    )
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    assert _failures(junit) == {}
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "soak.monitor"
    assert int(suite.get("tests") or 0) == len(outcome.artifact["criteria"]) + len(
        outcome.artifact["resource_summary"]["leak_verdicts"]
    )
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["artifact"] == str(outcome.output) and props["schema_version"] == "0.4.0"
    assert summary.read_text().startswith("### ✅ soak monitor")
    assert f"ci: {junit}" in outcome.stdout


def test_a_leaking_soak_fails_the_leak_class_in_junit_and_the_step_summary(tmp_path: Path) -> None:
    junit, step = tmp_path / "soak.xml", tmp_path / "step_summary"
    step.write_text("## earlier step\n")
    outcome = _run(
        tmp_path,
        "leak_eventfd.py",
        "4",
        extra=("--junit-xml", str(junit)),
        env={"GITHUB_STEP_SUMMARY": str(step)},
    )
    assert outcome.returncode == 1
    failures = _failures(junit)
    assert "leak.eventfd" in failures and failures["leak.eventfd"].startswith("eventfd growing")
    assert "criterion.leak_verdicts" in failures and "eventfd" in failures["criterion.leak_verdicts"]
    text = step.read_text()
    assert text.startswith("## earlier step\n") and "**Why:** resource_leak" in text


def test_a_bad_junit_path_is_refused_before_anything_runs(tmp_path: Path) -> None:
    outcome = _run(
        tmp_path, "healthy_plateau.py", "6", extra=("--junit-xml", str(tmp_path / "no" / "j.xml")), env={}
    )
    assert outcome.returncode == 2
    assert "--junit-xml: parent directory" in outcome.stderr
    assert not (tmp_path / "run").exists() and not outcome.output.exists()


def test_quiet_progress_thins_the_plain_lines(tmp_path: Path) -> None:
    (tmp_path / "loud").mkdir()
    (tmp_path / "quiet").mkdir()
    loud = _run(tmp_path / "loud", "healthy_plateau.py", "4", extra=(), env={})
    quiet_args = ("--quiet-progress", "--progress-every", "3600")
    quiet = _run(tmp_path / "quiet", "healthy_plateau.py", "4", extra=quiet_args, env={})
    progress = [
        [line for line in o.stderr.splitlines() if line.startswith("[soak] t=")] for o in (loud, quiet)
    ]
    assert len(progress[0]) >= 5  # one per 0.2 s sample over about 4 s
    assert len(progress[1]) == 1  # the first sample only: the next would be an hour later


def test_soak_run_refuses_a_bad_summary_path_before_spawning(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "run", "--algo", "sac", "--task", "g1_walk_flat",
        "--sim", "mujoco", "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "soak.json"),
        "--summary-md", str(tmp_path / "missing" / "summary.md"),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "--summary-md: parent directory" in done.stderr
    assert list(tmp_path.iterdir()) == []
