"""A benchmark's ``--json OUT`` is checked before any work: a path it cannot write is a usage error
(exit 2, naming the option), not a traceback after minutes of work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
WRITERS = ("survival_rates.py", "until_decided_rates.py", "survival_calibration.py")


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize("script", WRITERS)
def test_a_json_path_in_a_missing_folder_is_refused_before_any_work(script: str, tmp_path: Path):
    target = tmp_path / "no-such-folder" / "rates.json"
    done = _run(script, "--json", str(target))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--json" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not target.parent.exists()


def test_a_json_path_that_is_a_folder_is_refused(tmp_path: Path):
    done = _run("survival_rates.py", "--json", str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is a folder" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_writable_json_path_gets_the_printed_figures(tmp_path: Path):
    """One real (empty) stream list: the figures printed are the figures written."""
    empty = tmp_path / "empty.samples.jsonl"
    empty.write_text("")
    target = tmp_path / "rates.json"
    done = _run("survival_rates.py", str(empty), "--resamples", "0", "--json", str(target))
    assert done.returncode == 0, done.stderr
    assert target.read_text() == done.stdout
