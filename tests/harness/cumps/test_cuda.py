"""`cumps` against the real MPS control daemon on a CUDA host (run by scripts/gpu/acceptance.sh).

Skips cleanly without CUDA (the `cuda` marker); on a CUDA host without the driver's MPS utilities it
skips with that reason, since the daemon cannot exist there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soakbench.foundation import mps
from soakbench.harness.cumps import cli as cumps
from soakbench.harness.cumps import doctor as cumps_doctor

pytestmark = pytest.mark.cuda
runner = CliRunner()


def test_real_daemon_start_env_status_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which(mps.CONTROL_BINARY) is None:
        pytest.skip(f"{mps.CONTROL_BINARY} is not installed on this CUDA host")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    name = f"soakbench-test-{os.getpid()}"
    # The control socket path must fit in 107 bytes, which pytest's tmp_path does not promise.
    short = Path(tempfile.mkdtemp(prefix="cumps-", dir="/tmp"))
    pipe, log = short / "pipe", short / "log"
    started = runner.invoke(
        cumps.app, ["start", "--gpus", "0", "--name", name, "--pipe-dir", str(pipe), "--log-dir", str(log)]
    )
    assert started.exit_code == 0, started.output
    try:
        record = json.loads((tmp_path / "cache/soakbench/cumps" / f"{name}.json").read_text())
        assert mps.start_ticks(record["control_pid"]) == record["control_start_ticks"]
        assert mps.pipe_kind(pipe) in mps.CONTROL_KINDS  # a socket on current drivers
        assert record["control_pipe_kind"] == mps.pipe_kind(pipe)
        env = runner.invoke(cumps.app, ["env", "--name", name])
        assert f"export CUDA_MPS_PIPE_DIRECTORY={pipe}" in env.output
        status = runner.invoke(cumps.app, ["status"])
        assert f"daemon {name}: live" in status.output
        resolved = mps.resolve_for_training(record["gpu_uuid"], {})
        assert resolved["name"] == name and resolved["control_pipe_kind"] == record["control_pipe_kind"]
        answered = next(f for f in cumps_doctor.doctor_findings("0") if "get_server_list" in f.check)
        assert answered.ok, answered.detail
        assert record["gpu_uuid"] in cumps_doctor.torch_cuda_uuids(), "torch and NVML UUIDs differ in form"
    finally:
        stopped = runner.invoke(cumps.app, ["stop", "--name", name])
    assert stopped.exit_code == 0, stopped.output
    deadline = time.monotonic() + 10
    while mps.start_ticks(record["control_pid"]) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mps.start_ticks(record["control_pid"]) is None
    assert any(log.iterdir()), "the daemon's logs are kept after stop"
    shutil.rmtree(short)
