"""``soak compare``: the verdict rules on synthetic series, every refusal on edited copies of the
committed fixture, and two real short soaks of one program, one with a test-only eventfd leak."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from soakbench.foundation.schema import sorted_errors
from soakbench.harness.soak.verdicts.two_soaks import (
    THROUGHPUT_BLOCKS,
    ClassOutcome,
    duration_row,
    slope_fit,
    slope_row,
    survival_row,
    throughput_row,
    workload_command,
)
from tests.harness.soak._soakrun import REPO, monitor_args

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCHEMA = "soak-compare-2.schema.json"


def _blocks(center: float, spread: float, seed: int, points: int = 40) -> list[list[float]]:
    values = center * (1 + spread * np.random.default_rng(seed).standard_normal(points))
    return [list(map(float, b)) for b in np.array_split(values, THROUGHPUT_BLOCKS)]


def test_throughput_verdicts_on_known_series() -> None:
    same = throughput_row((_blocks(1000, 0.01, 1), _blocks(1000, 0.01, 2)), 0.05)
    assert same["verdict"] == "no_change" and same["ci_low"] < 1.0 < same["ci_high"]
    slower = throughput_row((_blocks(1000, 0.01, 1), _blocks(800, 0.01, 2)), 0.05)
    assert slower["verdict"] == "slower" and slower["ratio"] == pytest.approx(0.8, rel=0.02)
    missing = throughput_row(([], _blocks(800, 0.01, 2)), 0.05)
    assert missing["verdict"] == "inconclusive" and "progress records" in missing["note"]


def test_duration_is_called_only_with_a_noise_estimate() -> None:
    assert duration_row((100.0, 130.0), 0.05, 0.01)["verdict"] == "slower"
    assert duration_row((100.0, 101.0), 0.05, 0.01)["verdict"] == "no_change"
    assert duration_row((100.0, 101.0), 0.05, 0.20)["verdict"] == "inconclusive"
    unsized = duration_row((100.0, 130.0), 0.05, None)
    assert unsized["verdict"] == "inconclusive" and "not called" in unsized["note"]


def test_a_slope_that_turned_from_flat_to_rising_is_named() -> None:
    t = np.arange(0.0, 60.0, 0.5)
    rng = np.random.default_rng(0)
    flat = slope_fit(t, 40 + rng.integers(-1, 2, t.size).astype(float), 3.0)
    rising = slope_fit(t, 40 + 0.5 * t, 3.0)  # 30 fds over the window: still under a leak's persistence rule
    assert flat is not None and rising is not None
    assert (flat["state"], rising["state"]) == ("flat", "rising")
    low, high = rising["interval"]
    assert low <= 0.5 * 3600 <= high and rising["per_hour"] == pytest.approx(1800.0)
    row = slope_row("eventfd", (flat, rising))
    assert row["verdict"] == "slower" and "turned from flat to rising" in row["note"]
    assert slope_row("eventfd", (rising, flat))["verdict"] == "faster"
    assert slope_row("eventfd", (flat, flat))["verdict"] == "no_change"
    assert slope_row("eventfd", (None, flat))["verdict"] == "inconclusive"
    assert slope_fit(t[:3], t[:3], 3.0) is None


@pytest.mark.parametrize(
    ("base", "new", "verdict"),
    [
        ("survives", "fails", "slower"),
        ("inconclusive", "fails", "slower"),
        ("fails", "survives", "faster"),
        ("fails", "fails", "no_change"),
        ("survives", "survives", "no_change"),
        ("survives", "inconclusive", "inconclusive"),
        ("inconclusive", "survives", "inconclusive"),
        ("not_observable", "fails", "inconclusive"),
    ],
)
def test_a_class_survival_verdict_between_two_soaks(base: str, new: str, verdict: str) -> None:
    """Only a fails that appears is a regression: survives against inconclusive is one soak too short to
    decide, and a class not judged against the target on a side is not compared."""
    row = survival_row(
        "fds", (ClassOutcome(verdict=base, hours=40.0), ClassOutcome(verdict=new, hours=3.0)), 72 * 3600.0
    )
    assert row["verdict"] == verdict and (row["base_state"], row["new_state"]) == (base, new)
    assert (row["base"], row["new"], row["unit"]) == (40.0, 3.0, "h")
    assert (row["note"] is None) == (verdict == "no_change")


def test_a_class_projected_on_one_side_only_is_inconclusive() -> None:
    row = survival_row("map_count", (None, ClassOutcome(verdict="fails", hours=2.0)), 3600.0)
    assert row["verdict"] == "inconclusive" and "new soak only" in row["note"]


def test_the_command_is_compared_without_its_log_dir_and_interpreter_path() -> None:
    one = {"command": ["/a/.venv/bin/python", "p.py", "/tmp/x/run"], "log_dir": "/tmp/x/run"}
    two = {"command": ["/b/python", "p.py", "/tmp/y/run"], "log_dir": "/tmp/y/run"}
    assert workload_command(one) == workload_command(two) == ["python", "p.py", "<log_dir>"]


def _compare(base: Path, new: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "soakbench.harness.soak.cli", "compare", str(base), str(new), *flags],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip


def _copy(tmp: Path, name: str, edit: Any = None) -> Path:
    """The clean fixture and its samples in ``tmp/name/``, the artifact edited by ``edit``."""
    folder = tmp / name
    folder.mkdir()
    shutil.copy(FIXTURES / "samples_clean.jsonl", folder / "samples_clean.jsonl")
    doc = json.loads((FIXTURES / "artifact_clean.json").read_text())
    if edit is not None:
        edit(doc)
    target = folder / "soak.json"
    target.write_text(json.dumps(doc))
    return target


def test_the_fixture_against_itself_is_no_regression(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = _compare(
        FIXTURES / "artifact_clean.json",
        _copy(tmp_path, "b"),
        "--json-file",
        str(report),
        "--fail-on-regression",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(report.read_text())
    assert not sorted_errors(doc, SCHEMA)
    assert doc["regression"] is False and doc["turned_rising"] == [] and doc["cross_host"] is False
    assert {r["measure"]: r["verdict"] for r in doc["measures"]}["env_steps_per_s"] == "no_change"
    assert "soak compare: verdict" in done.stderr


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        node[leaf] = value

    return edit


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_settings.num_envs", 512),
        ("run_settings.sim", "mjwarp"),
        ("command", ["train", "--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco"]),
    ],
)
def test_a_different_workload_is_refused_naming_the_field(tmp_path: Path, field: str, value: Any) -> None:
    report = tmp_path / "report.json"
    done = _compare(
        FIXTURES / "artifact_clean.json", _copy(tmp_path, "b", _set(field, value)), "--json-file", str(report)
    )
    assert done.returncode == 2 and f"{field}:" in done.stderr and not report.exists()


def test_json_prints_one_document_on_stdout_and_nothing_else(tmp_path: Path) -> None:
    done = _compare(FIXTURES / "artifact_clean.json", _copy(tmp_path, "b"), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "soakbench.soak-compare" and not sorted_errors(doc, SCHEMA)
    assert "soak compare: verdict" in done.stderr


def test_a_different_host_needs_the_flag_and_is_then_announced(tmp_path: Path) -> None:
    other = _copy(tmp_path, "b", _set("context.host.cpu_model", "Other CPU"))
    report = tmp_path / "report.json"
    refused = _compare(FIXTURES / "artifact_clean.json", other, "--json-file", str(report))
    assert refused.returncode == 2 and "context.host" in refused.stderr and not report.exists()
    done = _compare(FIXTURES / "artifact_clean.json", other, "--allow-cross-host", "--json-file", str(report))
    assert done.returncode == 0 and "ACROSS HOSTS" in done.stderr
    assert json.loads(report.read_text())["cross_host"] is True


def test_other_setting_differences_are_listed(tmp_path: Path) -> None:
    other = _copy(tmp_path, "b", _set("context.software.torch", "9.9.9"))
    done = _compare(FIXTURES / "artifact_clean.json", other)
    assert done.returncode == 0 and "context.software.torch" in done.stderr


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    base, report = FIXTURES / "artifact_clean.json", tmp_path / "report.json"
    tampered = _copy(tmp_path, "tampered")
    with (tampered.parent / "samples_clean.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": 9999.0, "totals": {}}) + "\n")
    missing = _copy(tmp_path, "missing")
    (missing.parent / "samples_clean.jsonl").unlink()
    invalid = _copy(tmp_path, "invalid", _set("status", "maybe"))
    malformed = _copy(tmp_path, "malformed", lambda doc: doc.pop("samples_sha256"))  # so the edit is read
    (malformed.parent / "samples_clean.jsonl").write_text(json.dumps({"t": "soon", "totals": {}}) + "\n")
    cases = [
        (tampered, (), "samples_sha256"),
        (missing, (), "samples_path"),
        (invalid, (), "not a valid soak artifact"),
        (malformed, (), "cannot recompute"),
        (tmp_path / "absent.json", (), "cannot read"),
        (missing, ("--threshold", "1.5"), "--threshold"),
        (missing, ("--json-file", "relative.json"), "--json-file"),
    ]
    for new, flags, named in cases:
        done = (
            _compare(base, new, "--json-file", str(report), *flags)
            if "--json-file" not in flags
            else _compare(base, new, *flags)
        )
        assert done.returncode == 2 and named in done.stderr, (named, done.stderr)
        assert not report.exists()


def _soak(tmp: Path, leak: bool) -> Path:
    argv, output = monitor_args(tmp, "healthy_plateau.py", "6")
    env = {**os.environ, "SOAKBENCH_TEST_LEAK_EVENTFD": "1" if leak else "0"}
    subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert output.is_file()
    return output


@pytest.mark.slow
@pytest.mark.soak
def test_two_real_soaks_one_leaking_name_the_leaking_class(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "leaky").mkdir()
    plain, leaky = _soak(tmp_path / "plain", False), _soak(tmp_path / "leaky", True)
    report = tmp_path / "report.json"
    junit = tmp_path / "compare.xml"
    done = _compare(
        plain, leaky, "--fail-on-regression", "--json-file", str(report), "--junit-xml", str(junit),
        "--must-survive", "1h",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    failed = {
        c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None
    }
    assert {"slope.eventfd", "peak.eventfd", "survival.fds"} <= failed
    doc = json.loads(report.read_text())
    assert not sorted_errors(doc, SCHEMA)
    rows = {r["measure"]: r for r in doc["measures"]}
    assert "eventfd" in doc["turned_rising"] and rows["slope.eventfd"]["verdict"] == "slower"
    assert rows["peak.eventfd"]["verdict"] == "slower"
    assert "turned from flat to rising: eventfd" in " ".join(done.stderr.split())
    # 20 eventfds/s fail a 1 h target under the soft fd limit (the steady run survives it or, under a
    # low limit, cannot decide it in six seconds)
    assert doc["survival_target_seconds"] == 3600.0 and doc["turned_failing"] == ["fds"]
    fds = rows["survival.fds"]
    assert fds["base_state"] in ("survives", "inconclusive") and fds["new_state"] == "fails"
    assert fds["verdict"] == "slower"
    assert fds["new"] is not None and fds["new"] < 1.0 and "now fails the 60 min target" in fds["note"]
    assert "fails the survival target in the new soak only: fds" in " ".join(done.stderr.split())
    back = _compare(leaky, plain, "--json-file", str(report))
    assert back.returncode == 0
    doc = json.loads(report.read_text())
    rows = {r["measure"]: r for r in doc["measures"]}
    assert rows["slope.eventfd"]["verdict"] == "faster"
    # neither soak declared --must-survive: survival is not compared, and the output says so
    assert doc["survival_target_seconds"] is None and not [m for m in rows if m.startswith("survival.")]
    assert "survival: not compared" in back.stderr
