"""`cumps doctor`: every failing check names its fix, the live daemon is asked, and the learner's
CUDA device is compared with NVML (fake MPS control binary and NVML)."""

from __future__ import annotations

import os
import platform
import re
import signal
import socket
from pathlib import Path

import pytest

from soakbench.foundation import mps
from soakbench.harness.cumps import doctor as cumps_doctor
from tests.harness.cumps._host import UUID_A, UUID_B, gpu, invoke, set_gpus, stale_record

# CUDA MPS control and its liveness checks are Linux-only (/proc).
pytestmark = pytest.mark.linux_only


def test_every_failing_doctor_check_names_its_fix(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    monkeypatch.setenv("PATH", "/nonexistent")
    set_gpus(monkeypatch, [gpu(UUID_A), gpu(UUID_B)])
    stale_record("older")
    failing = [f for f in cumps_doctor.doctor_findings(None) if not f.ok]
    assert [f.check for f in failing] == [
        "Linux host",
        "one GPU selected",
        f"{mps.CONTROL_BINARY} on PATH",
        "no stale ownership records",
        "a live cumps daemon",
    ]
    for finding in failing:
        assert re.search(r"`[^`]+`", finding.fix), f"{finding.check}: no command in {finding.fix!r}"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    hidden = next(f for f in cumps_doctor.doctor_findings(None) if not f.ok and "NVML" in f.check)
    assert "hides them all" in hidden.detail and "`unset CUDA_VISIBLE_DEVICES`" in hidden.fix


def test_doctor_asks_the_live_daemon(host: Path, kind: str) -> None:
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    code, output = invoke("doctor")
    assert code == 0, output
    assert f"ok   daemon {name} answers get_server_list: answered over its control {kind}: " in output
    assert "MPS server PIDs 424242" in output
    assert (
        f"ok   learner's CUDA device is the selected GPU: torch's cuda:0 and NVML agree on {UUID_A}" in output
    )
    assert "command get_server_list" in (host / "cumps" / name / "log" / "control.log").read_text()
    assert invoke("stop")[0] == 0


def test_doctor_reports_a_daemon_that_does_not_answer(host: Path) -> None:
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    record = mps.load_records()[0][1]
    control = Path(record.pipe_dir) / "control"
    control.unlink()  # a socket nobody listens on stands where the daemon's was
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as deaf:
        deaf.bind(str(control))
    refused = next(f for f in cumps_doctor.doctor_findings(None) if not f.ok)
    assert refused.check == f"daemon {name} answers get_server_list"
    assert "failed (exit 1)" in refused.detail and "cannot connect" in refused.detail
    assert f"`kill {record.control_pid}`" in refused.fix
    assert f"--name {name} --pipe-dir {record.pipe_dir} --log-dir {record.log_dir}" in refused.fix
    control.unlink()
    code, output = invoke("doctor")
    assert code == 1 and f"{control} is missing, not a socket or a FIFO" in output
    assert f"first unmet prerequisite: daemon {name} answers get_server_list -> fix: read " in output
    os.kill(record.control_pid, signal.SIGKILL)


def _no_cuda() -> list[str]:
    raise cumps_doctor.NoCudaDevice("torch 2.x (CUDA build None) sees no CUDA device")


@pytest.mark.parametrize(
    ("query", "ok", "detail", "fix"),
    [
        (lambda: [UUID_A], True, f"torch's cuda:0 and NVML agree on {UUID_A}", ""),
        (
            lambda: [UUID_B],
            False,
            f"torch's cuda:0 is {UUID_B} but NVML names the selected GPU {UUID_A}",
            f"`export CUDA_VISIBLE_DEVICES={UUID_A}`",
        ),
        (lambda: [UUID_A, UUID_B], False, "torch sees 2 CUDA devices", f"CUDA_VISIBLE_DEVICES={UUID_A}"),
        (_no_cuda, False, "cannot be checked: torch 2.x (CUDA build None) sees no CUDA device", "CUDA build"),
    ],
    ids=["match", "mismatch", "several", "no-cuda"],
)
def test_learner_device_uuid_is_compared_with_nvml(query: object, ok: bool, detail: str, fix: str) -> None:
    assert callable(query)
    found = cumps_doctor.learner_device_finding([mps.Gpu(0, UUID_A, "NVIDIA H200")], query)
    assert found.ok is ok and detail in found.detail and fix in found.fix
    assert ok or re.search(r"`[^`]+`", found.fix), "a failing finding names a command"


def test_doctor_fails_closed_when_torch_cannot_tell(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert invoke("start")[0] == 0
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", _no_cuda)
    code, output = invoke("doctor")
    assert code == 1 and "FAIL learner's CUDA device is the selected GPU: cannot be checked" in output
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", lambda: [UUID_B.lower()])
    code, output = invoke("doctor")
    assert code == 1 and f"but NVML names the selected GPU {UUID_A}" in output
    assert invoke("stop")[0] == 0


def test_torch_query_without_cuda_says_why() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA; the cuda-marked tests cover the real UUID")
    with pytest.raises(cumps_doctor.NoCudaDevice, match="sees no CUDA device"):
        cumps_doctor.torch_cuda_uuids()


def test_doctor_records_the_clocks_at_start_and_fails_on_a_throttled_gpu(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    selected = [mps.Gpu(0, UUID_A, "NVIDIA H200")]
    cool = cumps_doctor.clocks_finding(selected)
    assert cool.ok and cool.detail == "GPU 0: 45 °C, clock events: none"
    hot = gpu(UUID_A)
    hot.reasons, hot.temperature = 0x4 | 0x40, 93  # SwPowerCap, HwThermal
    set_gpus(monkeypatch, [hot])
    throttled = cumps_doctor.clocks_finding(selected)
    assert not throttled.ok and throttled.detail == "GPU 0: 93 °C, clock events: SwPowerCap, HwThermal"
    assert "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`" in throttled.fix
    blind = gpu(UUID_A)
    blind.unsupported = {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperature"}
    set_gpus(monkeypatch, [blind])
    unknown = cumps_doctor.clocks_finding(selected)
    assert unknown.ok and unknown.detail == (
        "GPU 0: temperature not observable (Not Supported), clock events: not observable (Not Supported)"
    )
    _code, output = invoke("doctor")
    assert "GPU clocks not held down by heat, power brake or hardware slowdown: GPU 0: temperature" in output
