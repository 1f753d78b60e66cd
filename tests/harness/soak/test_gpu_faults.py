"""A real `soak monitor` subprocess over real programs, with the fake NVML loaded as its `pynvml`
(tests/harness/soak/fake_pynvml: first on PYTHONPATH, a JSON script named by SOAKBENCH_FAKE_NVML_SCRIPT;
the product has no hook). Each scripted GPU case is judged as docs/soak-reference.md ("GPU health") says, and a host
whose real pynvml finds no driver gives not_observable rows with NVML's reason and no failure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness.soak._soakrun import REPO, SoakOutcome, assert_nothing_left, monitor_args

pytestmark = [pytest.mark.soak, pytest.mark.linux_only]

SHIM = Path(__file__).resolve().parent / "fake_pynvml"
UUID = "GPU-00000000-fake-4000-8000-000000000079"
THERMAL = 0x20 | 0x40  # SwThermal | HwThermal


def _device(**spec: Any) -> dict[str, Any]:
    return {"uuid": UUID, "name": "NVIDIA H200 (fake)", "state": {"temperature": 48}, **spec}


def _soak(tmp: Path, script: dict[str, Any] | None, program: str, *args: str, **kwargs: Any) -> SoakOutcome:
    """`soak monitor` of ``faults/<program>``; ``script`` None leaves the real pynvml in place."""
    tmp.mkdir(parents=True, exist_ok=True)
    argv, output = monitor_args(tmp, program, *args, **kwargs)
    env = dict(os.environ)
    if script is not None:
        (tmp / "nvml.json").write_text(json.dumps(script))
        env["SOAKBENCH_FAKE_NVML_SCRIPT"] = str(tmp / "nvml.json")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM), env.get("PYTHONPATH")) if p)
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


def _samples(outcome: SoakOutcome) -> list[dict[str, Any]]:
    text = outcome.output.with_name("soak.samples.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_thermal_throttling_during_a_real_decline_is_named_in_the_drift_reason(tmp_path: Path) -> None:
    hot = {"reasons": THERMAL, "sm_clock": 1150, "temperature": 92, "power_mw": 455_000}
    script = {"devices": [_device(timeline=[{"at_s": 2.5, "set": hot}])]}
    reported = _soak(tmp_path / "reported", script, "slowing_trainer.py", "6", "1.0", interval=0.1)
    art = reported.artifact
    assert reported.returncode == 0, (art["failure_reason"], reported.stderr[-2000:])
    assert art["throughput_drift"]["verdict"] == "declining"
    assert (
        "GPU throttling coincides with the decline: HwThermal, SwThermal on GPU 0"
        in (art["throughput_drift"]["reason"])
    )
    row = reported.criterion("gpu_throttle")
    assert row["result"] == "not_applicable" and 0 < row["value"]["share"] < 1
    assert row["value"]["reasons"] == {
        "HwThermal": row["value"]["samples_throttled"],
        "SwThermal": row["value"]["samples_throttled"],
    }
    episode = art["gpu_health"]["throttle"]["episodes"][0]
    assert episode["index"] == 0 and episode["reasons"] == ["HwThermal", "SwThermal"]
    hot_samples = [s for s in _samples(reported) if s["gpu_health"]["devices"][0]["temperature_c"] == 92]
    assert hot_samples and all(s["gpu_health"]["devices"][0]["sm_clock_mhz"] == 1150 for s in hot_samples)
    html = reported.output.with_suffix(".html").read_text()
    assert 'data-gpu="0"' in html and "GPU health (NVML)" in html
    assert_nothing_left(reported)
    gated = _soak(
        tmp_path / "gated",
        script,
        "slowing_trainer.py",
        "6",
        "1.0",
        interval=0.1,
        extra=("--fail-on-gpu-throttle",),
    )
    assert gated.returncode == 1, gated.stderr[-2000:]
    assert gated.artifact["failure_classification"] == "gpu_throttle"
    assert gated.artifact["failure_reason"].startswith(
        "criterion gpu_throttle failed: GPU clocks held down in "
    )


def test_an_xid_79_before_the_trainer_dies_is_a_gpu_fault_naming_the_xid_the_gpu_and_the_time(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "xid-delivered"
    script = {"devices": [_device(xid=[{"at_s": 1.5, "xid": 79, "touch": str(marker)}])]}
    outcome = _soak(tmp_path, script, "gpu_fault_trainer.py", str(marker), "20")
    art = outcome.artifact
    assert outcome.returncode == 1, outcome.stderr[-2000:]
    assert art["trainer_returncode"] == 1
    assert art["failure_classification"] == "gpu_fault"
    assert art["failure_reason"].startswith(
        f"criterion gpu_xid_errors failed: critical XID 79 on GPU 0 ({UUID}) between t="
    )
    assert "also failed: trainer_returncode" in art["failure_reason"]
    (event,) = art["gpu_health"]["xid_events"]
    assert event["xid"] == 79 and event["index"] == 0 and event["uuid"] == UUID
    assert event["after_t"] < event["t"] <= art["timing"]["duration_s"]
    assert "fallen off the bus" in outcome.output.with_name("soak.console.log").read_text()
    assert_nothing_left(outcome)


def test_an_uncorrected_ecc_increase_fails_the_ecc_row(tmp_path: Path) -> None:
    script = {"devices": [_device(timeline=[{"at_s": 1.0, "set": {"ecc_uncorrected": 2}}])]}
    outcome = _soak(tmp_path, script, "healthy_plateau.py", "3")
    art = outcome.artifact
    assert outcome.returncode == 1, outcome.stderr[-2000:]
    row = outcome.criterion("gpu_ecc_uncorrected")
    assert row["result"] == "fail" and row["value"]["0"]["start"] == 0 and row["value"]["0"]["increase"] == 2
    assert art["failure_classification"] == "gpu_fault"
    assert (
        "volatile uncorrected ECC errors rose over the run: GPU 0: 0 -> 2 (first seen at t="
        in art["failure_reason"]
    )
    assert outcome.criterion("gpu_xid_errors")["result"] == "pass"
    assert_nothing_left(outcome)


def test_a_card_that_does_not_support_a_query_is_not_observable_and_does_not_fail(tmp_path: Path) -> None:
    unsupported = ["nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceRegisterEvents"]
    outcome = _soak(tmp_path, {"devices": [_device(unsupported=unsupported)]}, "healthy_plateau.py", "3")
    art = outcome.artifact
    assert outcome.returncode == 0, (art["failure_reason"], outcome.stderr[-2000:])
    assert outcome.criterion("gpu_ecc_uncorrected") == {
        **outcome.criterion("gpu_ecc_uncorrected"),
        "result": "not_applicable",
        "value": "not observable: GPU 0: Not Supported",
    }
    assert outcome.criterion("gpu_xid_errors")["value"] == "not observable: GPU 0: Not Supported"
    assert outcome.criterion("gpu_throttle")["value"]["share"] == 0.0
    device = art["gpu_health"]["devices"][0]
    assert device["start"]["ecc_volatile"]["uncorrected"] == {"not_observable": "Not Supported"}
    readings = [s["gpu_health"]["devices"][0] for s in _samples(outcome)]
    assert readings and all(r["power_w"] == {"not_observable": "Not Supported"} for r in readings)
    assert all(r["temperature_c"] == 48 for r in readings)
    assert_nothing_left(outcome)


def test_a_host_without_a_gpu_driver_gives_not_observable_rows_and_no_failure(tmp_path: Path) -> None:
    outcome = _soak(tmp_path, None, "healthy_plateau.py", "3")
    art = outcome.artifact
    if art["gpu_health"]["available"]:
        pytest.skip("this host has an NVIDIA driver")
    assert outcome.returncode == 0, (art["failure_reason"], outcome.stderr[-2000:])
    reason = art["gpu_health"]["reason"]
    assert reason and "NVML" in reason
    for name in ("gpu_xid_errors", "gpu_ecc_uncorrected", "gpu_throttle"):
        assert outcome.criterion(name)["result"] == "not_applicable"
        assert outcome.criterion(name)["value"] == f"not observable: {reason}"
    assert art["context"]["gpu"]["health_at_start"] == {"available": False, "reason": reason, "devices": []}
    assert all(s["gpu_health"]["available"] is False for s in _samples(outcome))
