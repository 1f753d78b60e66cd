"""`cumps` lifecycle against a fake MPS control binary and a fake NVML (test doubles under tests/)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from soakbench.foundation import mps
from tests.harness.cumps._host import FAKE_BIN, UUID_A, UUID_B, gpu, invoke, set_gpus, stale_record, wait_gone
from tests.harness.fake_nvml import FakeNvml

# CUDA MPS control and its liveness checks are Linux-only (/proc).
pytestmark = pytest.mark.linux_only


def test_start_env_status_stop_with_defaults(host: Path, kind: str) -> None:
    code, output = invoke("start")
    assert code == 0, output
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    record = json.loads((host / "cache/soakbench/cumps" / f"{name}.json").read_text())
    assert record["name"] == name and record["gpu_uuid"] == UUID_A and record["uid"] == os.getuid()
    assert record["control_start_ticks"] == mps.start_ticks(record["control_pid"])
    assert record["control_pipe_kind"] == kind and f"control {kind}" in output
    pipe, log = host / "cumps" / name / "pipe", host / "cumps" / name / "log"
    assert mps.pipe_kind(pipe) == kind
    for directory in (host / "cumps", host / "cumps" / name, pipe, log):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert "started gpu=" + UUID_A in (log / "control.log").read_text()

    code, output = invoke("env")
    assert code == 0
    assert f"export CUDA_MPS_PIPE_DIRECTORY={pipe}" in output
    assert f"export CUDA_VISIBLE_DEVICES={UUID_A}" in output
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ, "env must not change its own process environment"

    code, output = invoke("status")
    assert code == 0 and f"daemon {name}: live pid {record['control_pid']}" in output
    assert f"control {kind}" in output

    code, output = invoke("stop")
    assert code == 0, output
    assert wait_gone(record["control_pid"])
    assert (log / "control.log").exists(), "logs are kept after stop"
    assert "command quit" in (log / "control.log").read_text()
    assert not list((host / "cache/soakbench/cumps").glob("*.json"))


def test_several_gpus_need_a_selector(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_gpus(monkeypatch, [gpu(UUID_A), gpu(UUID_B)])
    code, output = invoke("start")
    assert code == 2 and "pass --gpus" in output
    code, output = invoke("doctor")
    assert code == 1 and "one GPU selected" in output and "fix: `uv run cumps doctor --gpus 0`" in output
    code, output = invoke("start", "--gpus", "1", "--name", "second")
    assert code == 0, output
    record = json.loads((host / "cache/soakbench/cumps/second.json").read_text())
    assert record["gpu_uuid"] == UUID_B
    code, output = invoke("env", "--name", "second")
    assert f"CUDA_VISIBLE_DEVICES={UUID_B}" in output
    assert invoke("stop", "--name", "second")[0] == 0
    assert wait_gone(record["control_pid"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "MIG-4f1e2d3c-aaaa-bbbb-cccc-000011112222"], "MIG instance"),
        (["--gpus", "0,1"], "multi-GPU gate"),
        (["--gpus", "all"], "read-only diagnostics"),
        (["--gpus", "7"], "matches no visible GPU"),
        (["--topology", "task_per_gpu"], "parsed but not supported"),
        (["--topology", "single_task_multi_gpu"], "parsed but not supported"),
        (["--topology", "ring"], "unknown"),
        (["--name", "../evil"], "is not allowed"),
        (["--pipe-dir", "relative/pipe"], "must be an absolute path"),
        (["--log-dir", "/tmp/a/../b"], "must not contain '..'"),
    ],
)
def test_start_refusals(host: Path, args: list[str], message: str) -> None:
    code, output = invoke("start", *args)
    assert code == 2 and message in output
    assert not (host / "cache/soakbench/cumps").exists() or not list(
        (host / "cache/soakbench/cumps").glob("*.json")
    )


def test_status_accepts_all(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_gpus(monkeypatch, [gpu(UUID_A), gpu(UUID_B)])
    code, output = invoke("status", "--gpus", "all")
    assert code == 0 and UUID_A in output and UUID_B in output


def test_wrong_directory_mode_is_refused(host: Path) -> None:
    pipe = host / "custom" / "pipe"
    pipe.mkdir(parents=True, mode=0o755)
    os.chmod(pipe, 0o755)
    code, output = invoke("start", "--pipe-dir", str(pipe), "--log-dir", str(host / "custom" / "log"))
    assert code == 2 and "expected 0o700" in output


def test_stale_record_is_quarantined_not_deleted(host: Path) -> None:
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    stale = stale_record(name)
    stale_record("older")
    stale_record("elsewhere", host_name="another-host")
    code, output = invoke("status")
    assert "daemon older: STALE" in output and "daemon elsewhere: STALE" in output
    assert "left to its host" in output
    code, output = invoke("start")
    assert code == 0, output
    assert output.count("quarantined stale record") == 2
    quarantine = host / "cache/soakbench/cumps/quarantine"
    kept = list(quarantine.glob(f"{name}.*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["control_pid"] == stale.control_pid
    assert "is gone" in kept[0].with_suffix(".reason.txt").read_text()
    assert len(list(quarantine.glob("older.*.json"))) == 1
    assert (host / "cache/soakbench/cumps/elsewhere.json").exists(), "another host's record was touched"
    assert invoke("stop")[0] == 0


def test_unreadable_record_is_reported_not_a_traceback(host: Path) -> None:
    records = host / "cache/soakbench/cumps"
    records.mkdir(parents=True)
    (records / "broken.json").write_text("{not json")
    code, output = invoke("status")
    assert code == 2 and "unreadable ownership record" in output
    code, output = invoke("doctor")
    assert code == 1 and "first unmet prerequisite: ownership records readable -> fix: `mv " in output
    code, output = invoke("stop")
    assert code == 2 and "broken.json" in output


def test_stop_never_quits_an_unmanaged_daemon(host: Path, kind: str) -> None:
    pipe = host / "unmanaged" / "pipe"
    pipe.mkdir(parents=True)
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(pipe)}
    subprocess.run([str(FAKE_BIN / "nvidia-cuda-mps-control"), "-d"], env=env, check=True)
    pid = mps.find_control_pid(pipe)
    assert pid is not None
    try:
        code, output = invoke("stop")
        assert code == 2 and "no live cumps-recorded daemon" in output
        # A record whose PID now belongs to another process (start ticks differ) is not evidence either.
        forged = mps.DaemonRecord(
            name="forged",
            uid=os.getuid(),
            host=os.uname().nodename,
            control_pid=pid,
            control_start_ticks=(mps.start_ticks(pid) or 0) + 1,
            gpu_uuid=UUID_A,
            pipe_dir=str(pipe),
            log_dir=str(pipe),
            started_unix=0.0,
        )
        mps.write_record(forged)
        code, output = invoke("stop", "--name", "forged")
        assert code == 2 and "stale" in output
        assert mps.pipe_kind(pipe) == kind and mps.start_ticks(pid) is not None, (
            "unmanaged daemon was touched"
        )
    finally:
        os.kill(pid, signal.SIGKILL)


def test_training_validation_resolves_or_fails_closed(host: Path, kind: str) -> None:
    with pytest.raises(mps.CumpsError, match="run `cumps start` first"):
        mps.resolve_for_training(UUID_A, {})
    assert invoke("start")[0] == 0
    resolved = mps.resolve_for_training(UUID_A, {})
    assert resolved["source"] == "record" and resolved["gpu_uuid"] == UUID_A
    assert resolved["control_pipe_kind"] == kind
    with pytest.raises(mps.CumpsError, match="none is recorded"):
        mps.resolve_for_training(UUID_B, {})
    explicit = mps.resolve_for_training(UUID_A, {"CUDA_MPS_PIPE_DIRECTORY": resolved["pipe_dir"]})
    assert explicit["source"] == "environment" and explicit["control_pid"] == resolved["control_pid"]
    assert explicit["control_pipe_kind"] == kind
    with pytest.raises(mps.CumpsError, match="has no control pipe"):
        mps.resolve_for_training(UUID_A, {"CUDA_MPS_PIPE_DIRECTORY": str(host / "nowhere")})
    ambient = mps.ambient_facts({"CUDA_MPS_PIPE_DIRECTORY": resolved["pipe_dir"]})
    assert (
        ambient["control_pipe_kind"] == kind and ambient["server_pid"] == 424242 and ambient["ambient_server"]
    )
    assert invoke("stop")[0] == 0


def test_ambient_facts_without_a_daemon(host: Path) -> None:
    facts = mps.ambient_facts({"CUDA_MPS_PIPE_DIRECTORY": str(host / "none")})
    assert facts == {
        "raw_cuda_mps_pipe_directory": str(host / "none"),
        "effective_pipe_dir": str(host / "none"),
        "control_pipe_kind": "missing",
        "server_pid": None,
        "ambient_server": False,
    }


def test_no_gpu_host(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = FakeNvml([], fail={"nvmlInit": RuntimeError("NVML Shared Library Not Found")})
    monkeypatch.setitem(__import__("sys").modules, "pynvml", broken)
    code, output = invoke("status")
    assert code == 1 and "GPU: none visible" in output and "Shared Library Not Found" in output
    code, output = invoke("doctor")
    assert code == 1 and "first unmet prerequisite: NVIDIA GPU visible through NVML" in output
    assert "fix: `nvidia-smi` must list the GPU" in output
    code, output = invoke("start")
    assert code == 2 and "no GPU evidence" in output


def test_old_records_without_the_control_kind_still_load(host: Path) -> None:
    record = stale_record("old")
    path = host / "cache/soakbench/cumps/old.json"
    data = json.loads(path.read_text())
    del data["control_pipe_kind"]
    path.write_text(json.dumps(data))
    (_, loaded), *_ = mps.load_records()
    assert loaded == record and loaded.control_pipe_kind is None
