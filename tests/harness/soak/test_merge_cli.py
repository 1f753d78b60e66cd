"""`soak merge` refuses bad input with exit 2 and one line naming it, and writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.soak._soakrun import REPO


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "soakbench.harness.soak.cli", "merge", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    binary = tmp_path / "samples.json"
    binary.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")  # a gzip header, not UTF-8
    folder = tmp_path / "folder.json"
    folder.mkdir()
    return {"binary": binary, "folder": folder, "missing": tmp_path / "missing.json"}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "missing.json: cannot read"),
        ("folder", "folder.json: cannot read"),
        ("binary", "samples.json: not UTF-8 text (byte 1): not a soak artifact"),
    ],
)
def test_an_unreadable_artifact_is_exit_2(inputs: dict[str, Path], case: str, message: str) -> None:
    done = _merge(str(inputs[case]), str(inputs["missing"]))
    assert done.returncode == 2, done.stderr
    assert message in " ".join(done.stderr.split()) and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("relative.json", "--output: must be an absolute .json path"),
        ("{folder}", "is a directory, not a file"),
        ("{binary}", "is one of the artifacts being merged"),
    ],
)
def test_a_bad_output_is_exit_2_before_anything_is_read(
    inputs: dict[str, Path], output: str, message: str
) -> None:
    target = output.format(**{k: str(v) for k, v in inputs.items()})
    done = _merge(str(inputs["binary"]), str(inputs["missing"]), "--output", target)
    assert done.returncode == 2, done.stderr
    assert message in " ".join(done.stderr.split())
    assert inputs["binary"].read_bytes().startswith(b"\x1f\x8b")  # the input was not overwritten
