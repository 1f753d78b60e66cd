"""`soak monitor --must-survive T --until-decided MAX` over real programs: a run stops as soon as every
class with a limit survives or one fails (a fail with stacks), or at MAX undecided (exit 3); the stop is
not a failure, and the judgement replayed from the samples file reaches the same look."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from soakbench.harness.soak.evidence.artifact import validation_errors
from soakbench.harness.soak.verdicts.judgement import facts_from_artifact, gates_from_artifact, judge
from tests.harness.soak._soakrun import REPO, SoakOutcome, monitor_args, soak_monitor

pytestmark = [pytest.mark.soak, pytest.mark.slow]


def _replayed(outcome: SoakOutcome) -> tuple[str, dict[str, object] | None]:
    """The status and standing look that the artifact's samples give when judged again."""
    artifact = outcome.artifact
    path = outcome.output.with_name(outcome.output.stem + ".samples.jsonl")
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    judgement = judge(samples, facts=facts_from_artifact(artifact), gates=gates_from_artifact(artifact))
    assert judgement.survival is not None
    return judgement.status, judgement.survival.to_json().get("looks")


def test_a_decided_fail_stops_the_run_early_with_stacks(tmp_path: Path) -> None:
    # 20 fds/s under a limit of 1000: exhausted after ~50 s; the program would run 60 s
    outcome = soak_monitor(
        tmp_path, "leak_fd_under_limit.py", "60", "1000", "1",
        extra=("--must-survive", "1h", "--until-decided", "10m"),
    )  # fmt: skip
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    artifact = outcome.artifact
    assert validation_errors(artifact) == []
    assert artifact["failure_classification"] == "resource_exhaustion"
    stop = artifact["monitor"]["stop"]
    assert stop["reason"] == "survival_decided" and stop["verdict"] == "fails"
    assert artifact["timing"]["duration_s"] < 40.0  # stopped long before the program's 60 s
    looks = artifact["survival"]["looks"]
    assert looks["decided"] is True and looks["final"] is False and looks["t"] == stop["t"]
    assert [c["trigger"] for c in artifact["forensics"]["captures"]] == ["survival_fails"]
    assert outcome.criterion("monitor_status")["result"] == "pass"
    assert outcome.criterion("trainer_returncode")["result"] == "not_applicable"
    assert outcome.criterion("tree_deaths")["result"] != "fail"
    assert "look 1" in outcome.stderr and "survival decided (fails)" in outcome.stdout  # live note, table
    assert _replayed(outcome) == ("failed", looks)
    html = outcome.output.with_suffix(".html").read_text()
    assert 'id="survival-looks"' in html and "the verdict of look 1 at t=" in html and "97.5 % bounds" in html


def test_a_steady_program_is_stopped_once_it_survives_the_target(tmp_path: Path) -> None:
    outcome = soak_monitor(
        tmp_path, "leak_fd_under_limit.py", "60", "4096", "0",
        extra=("--must-survive", "2m", "--until-decided", "10m"),
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    artifact = outcome.artifact
    assert validation_errors(artifact) == []
    assert artifact["status"] == "passed" and artifact["survival"]["verdict"] == "survives"
    assert artifact["monitor"]["stop"]["verdict"] == "survives"
    assert artifact["timing"]["duration_s"] < 40.0
    assert artifact["forensics"]["captures"] == []  # no stacks for a run that survives
    assert outcome.criterion("min_duration")["result"] == "not_applicable"
    assert _replayed(outcome) == ("passed", artifact["survival"]["looks"])


def test_an_undecided_run_stops_at_the_maximum_and_exits_3(tmp_path: Path) -> None:
    outcome = soak_monitor(
        tmp_path, "leak_fd_under_limit.py", "60", "160", "0",
        extra=("--must-survive", "72h", "--until-decided", "8s"),
    )  # fmt: skip
    assert outcome.returncode == 3, outcome.stdout + outcome.stderr
    artifact = outcome.artifact
    assert artifact["status"] == "inconclusive"
    assert artifact["monitor"]["stop"] == {
        "reason": "max_duration",
        "t": pytest.approx(8.0, abs=1.0),
        "verdict": None,
    }
    looks = artifact["survival"]["looks"]
    assert looks["final"] is True and looks["decided"] is False and looks["count"] >= 2
    assert _replayed(outcome) == ("inconclusive", looks)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--until-decided", "1h"), "--until-decided: needs --must-survive"),
        (("--must-survive", "1h", "--until-decided", "soon"), "Invalid value for '--until-decided'"),
    ],
)
def test_until_decided_without_a_target_or_with_a_bad_duration_is_refused(
    tmp_path: Path, extra: tuple[str, ...], said: str
) -> None:
    argv, output = monitor_args(tmp_path, "leak_fd_under_limit.py", "1", extra=extra)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr + done.stdout
    assert not output.exists()
