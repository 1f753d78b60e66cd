"""`cumps status|doctor|env --json`: one document on stdout, the same exit codes as the text output
(fake MPS control binary and NVML)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.foundation import mps
from soakbench.harness.cumps import cli as cumps
from tests.harness.cumps._host import FAKE_BIN, UUID_A, invoke, invoke_json, runner, stale_record
from tests.harness.fake_nvml import FakeNvml

# CUDA MPS control and its liveness checks are Linux-only (/proc).
pytestmark = pytest.mark.linux_only


def test_json_of_status_doctor_and_env(host: Path) -> None:
    stale_record("older")
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    code, status = invoke_json("status", "--json")
    assert code == 0 and set(status) == {"schema_version", "gpu", "daemons", "cuda_mps_pipe_directory"}
    assert status["gpu"] == {
        "available": True,
        "reason": None,
        "devices": [{"index": 0, "uuid": UUID_A, "name": "NVIDIA H200"}],
    }
    assert status["cuda_mps_pipe_directory"] is None
    daemons = status["daemons"]
    assert isinstance(daemons, list) and [d["state"] for d in daemons] == ["live"]
    live = daemons[0]
    assert live["name"] == name and live["control_pipe_kind"] == "socket" and live["stale_reason"] is None
    assert set(live) == {
        "name",
        "state",
        "stale_reason",
        "quarantined_by_next_start",
        "control_pid",
        "gpu_uuid",
        "pipe_dir",
        "log_dir",
        "control_pipe_kind",
    }

    code, doctor = invoke_json("doctor", "--json")
    assert code == 0 and doctor["ok"] is True and doctor["first_unmet"] is None
    findings = doctor["findings"]
    assert isinstance(findings, list) and all(set(f) == {"check", "ok", "detail", "fix"} for f in findings)
    assert f"daemon {name} answers get_server_list" in [f["check"] for f in findings]

    code, env = invoke_json("env", "--json")
    assert code == 0 and env["name"] == name
    assert env["exports"] == {
        "CUDA_MPS_PIPE_DIRECTORY": str(host / "cumps" / name / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(host / "cumps" / name / "log"),
        "CUDA_VISIBLE_DEVICES": UUID_A,
    }
    assert invoke("stop")[0] == 0


def test_json_keeps_the_exit_codes(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale_record("older", host_name="another-host")
    code, status = invoke_json("status", "--json")
    assert code == 0 and [(d["name"], d["state"]) for d in status["daemons"]] == [("older", "stale")]
    assert status["daemons"][0]["quarantined_by_next_start"] is False
    code, doctor = invoke_json("doctor", "--json")
    assert code == 1 and doctor["ok"] is False
    assert doctor["first_unmet"] == {
        "check": "a live cumps daemon for the selected GPU",
        "fix": "`uv run cumps start`",
    }
    result = runner.invoke(cumps.app, ["env", "--json"])
    assert result.exit_code == 2 and result.stdout == "" and "no live cumps-recorded daemon" in result.stderr
    broken = FakeNvml([], fail={"nvmlInit": RuntimeError("NVML Shared Library Not Found")})
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    code, status = invoke_json("status", "--json")
    assert code == 1 and status["gpu"]["available"] is False
    assert "Shared Library Not Found" in str(status["gpu"]["reason"])


def _real_cumps(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``cumps`` as a user runs it: the host's own NVML (or its absence), the fake control binary on
    PATH, every Python warning shown (they belong on stderr)."""
    env = {
        **os.environ,
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(cache),
        "PYTHONWARNINGS": "always",
        "COLUMNS": "60",
    }
    env.pop("CUDA_MPS_PIPE_DIRECTORY", None)
    command = [sys.executable, "-m", "soakbench.harness.cumps.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)


def test_json_stdout_of_the_real_command_is_one_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    stale_record("elsewhere", host_name="another-host")  # a stale record: a note in text mode
    records = mps.records_dir()
    assert records == tmp_path / "soakbench" / "cumps" and (records / "elsewhere.json").is_file()
    for args in (["status", "--json"], ["status", "--gpus", "all", "--json"], ["doctor", "--json"]):
        result = _real_cumps(*args, cache=tmp_path)
        assert result.returncode in (0, 1), result.stderr  # 1: this host lacks a GPU or the MPS setup
        document = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
        assert isinstance(document, dict) and document["schema_version"] == 1, args
    status = json.loads(_real_cumps("status", "--json", cache=tmp_path).stdout)
    assert [(d["name"], d["state"]) for d in status["daemons"]] == [("elsewhere", "stale")]
    refused = _real_cumps("env", "--json", cache=tmp_path)  # a refusal: text on stderr, stdout empty
    assert refused.returncode == 2 and refused.stdout == "" and "refused" in refused.stderr
    (records / "broken.json").write_text("{not json")
    refused = _real_cumps("status", "--json", cache=tmp_path)
    assert refused.returncode == 2 and refused.stdout == "" and "broken.json" in refused.stderr
