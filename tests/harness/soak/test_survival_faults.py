"""`soak monitor --must-survive` over real programs that leak what kills long runs (fds under their own
limit, zombies, disk, /dev/shm bytes with no fd held) and two that must not fail (a buffer that fills
and plateaus, a sawtooth fd user). Each run lasts seconds; the projection is what is judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.evidence.artifact import validation_errors
from tests.harness.soak._soakrun import SoakOutcome, soak_monitor

pytestmark = [pytest.mark.soak, pytest.mark.slow]


def _survival(outcome: SoakOutcome) -> dict[str, Any]:
    assert validation_errors(outcome.artifact) == []
    survival: dict[str, Any] = outcome.artifact["survival"]
    return survival


def _classes(outcome: SoakOutcome, name: str) -> list[dict[str, Any]]:
    return [c for c in _survival(outcome)["classes"] if c["class"] == name]


def _samples(outcome: SoakOutcome) -> list[dict[str, Any]]:
    path = outcome.output.with_name(outcome.output.stem + ".samples.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_fd_leak_under_the_process_own_limit_fails_and_names_pid_role_limit_and_time(tmp_path: Path):
    outcome = soak_monitor(
        tmp_path, "leak_fd_under_limit.py", "4", "160", "1", extra=("--must-survive", "1h")
    )
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    artifact = outcome.artifact
    assert artifact["failure_classification"] == "resource_exhaustion"
    [fds] = [c for c in _classes(outcome, "fds") if c["verdict"] == "fails"]
    assert fds["limit"] == 160 and "soft RLIMIT_NOFILE" in fds["limit_source"]
    assert fds["hours_to_exhaustion_lower"] < 1.0
    assert fds["attribution"][0].startswith("+") and fds["attribution"][0].endswith(" pipe")  # what grew
    assert (
        fds["attribution"][-1].startswith("process: ") and "leak_fd_under_limit.py" in fds["attribution"][-1]
    )
    reason = artifact["failure_reason"]
    assert f"pid {fds['scope']} ({fds['role']})" in reason
    assert "of 160 (soft RLIMIT_NOFILE" in reason and "no sooner than" in reason
    limits = {item["resource"] for item in artifact["limits"]["limits"]}
    assert {"memory", "tasks", "shm_bytes", "disk", "map_count", "fds", "gpu_memory"} <= limits
    assert "survival" in outcome.stdout and "FAIL" in outcome.stdout
    # the 13 rows a plain command cannot be judged on fold into one line, in the console and the report
    assert "13 rows: no run summary judged" in outcome.stdout and "replay drops" not in outcome.stdout
    html = outcome.output.with_suffix(".html").read_text()
    assert 'data-criterion="run_contract_rows"' in html and 'data-criterion="replay_no_drops"' not in html
    assert 'data-survival="fds"' in html and html.count('alt="projection to the limit"') >= 1


def test_steady_fds_under_a_low_limit_are_inconclusive_in_seconds_and_exit_3(tmp_path: Path):
    """Zero net growth over W seconds still bounds the rate at 3 / W: a few seconds cannot vouch for 72 h."""
    outcome = soak_monitor(
        tmp_path, "leak_fd_under_limit.py", "4", "160", "0", extra=("--must-survive", "72h")
    )
    assert outcome.returncode == 3, outcome.stdout + outcome.stderr
    artifact = outcome.artifact
    assert artifact["status"] == "inconclusive" and artifact["failure_classification"] is None
    undecided = [c for c in _classes(outcome, "fds") if c["verdict"] == "inconclusive"]
    assert undecided and all(c["decide_after_seconds"] > 60.0 for c in undecided)
    assert "INCONCLUSIVE" in outcome.stdout and "exit code 3" in outcome.stdout


@pytest.mark.parametrize("program", ["healthy_plateau.py", "healthy_sawtooth.py"])
def test_a_filled_buffer_and_a_sawtooth_never_fail_the_survival_verdict(tmp_path: Path, program: str):
    outcome = soak_monitor(tmp_path, program, "5", extra=("--must-survive", "90m"))
    assert outcome.returncode in (0, 3), outcome.stdout + outcome.stderr
    survival = _survival(outcome)
    assert survival["verdict"] != "fails"
    assert not [c for c in survival["classes"] if c["verdict"] == "fails"]


def test_zombies_are_counted_as_a_class_with_the_parent_that_does_not_reap_them(tmp_path: Path):
    outcome = soak_monitor(tmp_path, "leak_zombies.py", "4")
    assert outcome.returncode in (0, 1), outcome.stdout + outcome.stderr
    [zombies] = _classes(outcome, "zombies")
    assert zombies["level"] >= 10
    assert _classes(outcome, "process_count")[0]["attribution"] == []  # a zombie is no live process
    root = outcome.monitor["root_pid"]
    assert any(f"parent pid {root}:" in text for text in zombies["attribution"])
    last = max(_samples(outcome), key=lambda s: s["totals"]["zombies"])
    assert last["totals"]["zombies"] == len(last["zombies"]) and {z["ppid"] for z in last["zombies"]} == {
        root
    }


def test_bytes_written_under_a_watched_path_are_projected_to_its_free_space(tmp_path: Path):
    watched = tmp_path / "checkpoints"
    outcome = soak_monitor(
        tmp_path,
        "leak_disk.py",
        str(watched),
        "4",
        "1",
        extra=("--watch-path", str(watched), "--must-survive", "3d"),
    )
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    [disk] = _classes(outcome, f"disk:{watched}")
    assert disk["verdict"] == "fails" and disk["rate_lower_per_hour"] > 0
    assert disk["limit_source"].startswith(f"statvfs of {watched}")
    assert disk["attribution"] and disk["attribution"][0].startswith(". +")  # the files at its top grew
    assert any(
        entry["path"] == str(watched) for entry in outcome.artifact["limits"]["limits"] if entry["path"]
    )


def test_shm_bytes_mapped_with_no_fd_held_are_counted_and_projected(tmp_path: Path):
    outcome = soak_monitor(tmp_path, "leak_shm_mapped.py", "4", "0.5", extra=("--must-survive", "72h"))
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    [shm] = _classes(outcome, "shm_bytes")
    assert shm["verdict"] == "fails" and shm["level"] >= 8 * (1 << 20)
    assert any("soakbench-test-leak" in name for name in shm["attribution"])


def test_a_duration_that_is_no_duration_is_refused_naming_the_option(tmp_path: Path):
    outcome = soak_monitor(tmp_path, "healthy_plateau.py", "1", extra=("--must-survive", "3 weeks"))
    assert outcome.returncode == 2
    assert "--must-survive" in outcome.stderr and "90m, 72h, 3d" in outcome.stderr
    assert not outcome.output.exists()
