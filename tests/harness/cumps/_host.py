"""The fake host the `cumps` tests run on: a fake MPS control binary on PATH, a fake NVML, and the
helpers that drive the CLI and forge ownership records (test doubles: live only under tests/)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from soakbench.foundation import mps
from soakbench.harness.cumps import cli as cumps
from tests.harness.fake_nvml import FakeDevice, FakeNvml

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"
UUID_A = "GPU-1a2b3c4d-0000-1111-2222-333344445555"
UUID_B = "GPU-9f8e7d6c-0000-1111-2222-333344445555"
runner = CliRunner()


def gpu(uuid: str) -> FakeDevice:
    return FakeDevice(uuid=uuid, name="NVIDIA H200", used=0, total=141 << 30)


def set_gpus(monkeypatch: pytest.MonkeyPatch, devices: list[FakeDevice]) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNvml(devices))


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(cumps.app, list(args))
    return result.exit_code, result.output


def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while mps.start_ticks(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return mps.start_ticks(pid) is None


def stale_record(name: str, host_name: str | None = None) -> mps.DaemonRecord:
    """A record whose control process has exited."""
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    record = mps.DaemonRecord(
        name=name,
        uid=os.getuid(),
        host=host_name or socket.gethostname(),
        control_pid=dead.pid,
        control_start_ticks=1,
        gpu_uuid=UUID_A,
        pipe_dir="/nonexistent/pipe",
        log_dir="/nonexistent/log",
        started_unix=0.0,
    )
    mps.write_record(record)
    return record


def record_of(host: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((host / "cache/soakbench/cumps" / f"{name}.json").read_text())
    return data


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(cumps.app, list(args))
    document = json.loads(result.stdout)  # the whole of stdout is one document, no markup
    assert isinstance(document, dict) and document["schema_version"] == 1
    return result.exit_code, document
