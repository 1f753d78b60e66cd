"""Fixtures of the `cumps` tests: the fake host and the control endpoint kind of its fake daemon."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from soakbench.foundation import mps
from soakbench.harness.cumps import doctor as cumps_doctor
from tests.harness.cumps._host import FAKE_BIN, UUID_A, gpu, set_gpus


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A host with the fake control binary on PATH, a private cache and MPS root, and one GPU that
    torch sees too. Everything lives under one short directory: a control socket path must fit in
    107 bytes, which pytest's tmp_path does not promise."""
    root = Path(tempfile.mkdtemp(prefix="cumps-", dir="/tmp"))
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("FAKE_MPS_CONTROL_KIND", raising=False)
    monkeypatch.setattr(mps, "DEFAULT_ROOT", root / "cumps")
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", lambda: [UUID_A])
    set_gpus(monkeypatch, [gpu(UUID_A)])
    yield root
    for path in (root / "cache").rglob("*.json"):
        try:
            pid = json.loads(path.read_text()).get("control_pid")
            if pid and mps.start_ticks(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        except (ValueError, ProcessLookupError, AttributeError):
            pass
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["socket", "fifo"])
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake daemon's control endpoint: a Unix socket (current drivers) or a FIFO (older ones)."""
    monkeypatch.setenv("FAKE_MPS_CONTROL_KIND", request.param)
    return str(request.param)
