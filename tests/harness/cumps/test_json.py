"""`cumps status|doctor|env --json`: one document on stdout, the same exit codes as the text output
(fake MPS control binary and NVML)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cumps import cli as cumps
from tests.harness.cumps._host import UUID_A, invoke, invoke_json, runner, stale_record
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
