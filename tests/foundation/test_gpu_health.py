"""foundation.gpu_health against the fake NVML: XID events after registration, counters, readings, and
``not_observable`` with NVML's reason wherever a query fails, never a 0."""

from __future__ import annotations

from typing import Any

from soakbench.foundation.gpu_health import GpuHealthReader, decode_reasons, health_at_start
from tests.harness import fake_nvml as fake

NOT_SUPPORTED = {"not_observable": "Not Supported"}


def _gpus(count: int = 2, **state: Any) -> fake.FakeNvml:
    return fake.FakeNvml([fake.FakeDevice(f"GPU-{i}", "NVIDIA H200", 0, 1, **state) for i in range(count)])


def test_decode_names_every_bit_and_keeps_unknown_ones() -> None:
    assert decode_reasons(0) == []
    assert decode_reasons(0x4 | 0x8 | 0x20 | 0x40 | 0x80) == [
        "SwPowerCap",
        "HwSlowdown",
        "SwThermal",
        "HwThermal",
        "HwPowerBrake",
    ]
    assert decode_reasons(0x1 | 0x1000) == ["GpuIdle", "unknown(0x1000)"]


def test_start_registers_for_xid_before_reading_and_records_the_counters() -> None:
    nvml = _gpus(ecc_corrected=3, remapped=(1, 0, 0, 0), pcie_replay=7)
    with GpuHealthReader(nvml) as reader:
        start = reader.start()
        assert nvml.event_sets and nvml.event_sets[0].devices == nvml.devices  # registered first
    assert start["available"] is True and start["reason"] is None
    device = start["devices"][0]
    assert device["xid_events"] == {"registered": True}
    assert device["counters"] == {
        "ecc_volatile": {"corrected": 3, "uncorrected": 0},
        "remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": False, "failure": False},
        "retired_pages": {"single_bit_ecc": 0, "double_bit_ecc": 0, "pending": False},
        "pcie_replay_counter": 7,
    }
    assert device["reading"]["temperature_c"] == 45
    assert nvml.shutdown_calls == 1 and nvml.event_sets == []  # the set is freed on close


def test_sample_reads_clocks_reasons_temperature_power_and_drains_xid_events() -> None:
    nvml = _gpus(reasons=fake.THERMAL, power_mw=287_500)
    with GpuHealthReader(nvml) as reader:
        reader.start()
        nvml.post_xid(nvml.devices[1], 79)
        nvml.post_xid(nvml.devices[1], 48)
        first = reader.sample()
        second = reader.sample()
    reading = first["devices"][0]
    assert reading == {
        "index": 0,
        "uuid": "GPU-0",
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201,
        "clock_event_reasons": {"mask": 0x60, "names": ["SwThermal", "HwThermal"]},
        "temperature_c": 45,
        "power_w": 287.5,
        "ecc_uncorrected": 0,
    }
    assert first["xid_events"] == [
        {"xid": 79, "index": 1, "uuid": "GPU-1"},
        {"xid": 48, "index": 1, "uuid": "GPU-1"},
    ]
    assert second["xid_events"] == [] and second["event_error"] is None


def test_events_before_registration_are_not_delivered() -> None:
    nvml = _gpus(1)
    nvml.post_xid(nvml.devices[0], 13)  # no event set yet: NVML records nothing
    with GpuHealthReader(nvml) as reader:
        reader.start()
        assert reader.sample()["xid_events"] == []


def test_unsupported_queries_are_not_observable_with_nvmls_reason() -> None:
    nvml = _gpus(1)
    nvml.devices[0].unsupported = {
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceRegisterEvents",
    }
    with GpuHealthReader(nvml) as reader:
        start = reader.start()
        sample = reader.sample()
    device = start["devices"][0]
    assert device["xid_events"] == NOT_SUPPORTED
    assert device["counters"]["ecc_volatile"] == {"corrected": NOT_SUPPORTED, "uncorrected": NOT_SUPPORTED}
    assert device["counters"]["retired_pages"] == NOT_SUPPORTED
    assert sample["devices"][0]["power_w"] == NOT_SUPPORTED
    assert sample["devices"][0]["ecc_uncorrected"] == NOT_SUPPORTED
    assert sample["devices"][0]["temperature_c"] == 45
    assert nvml.calls.get("nvmlEventSetWait_v2") is None  # nothing registered: no wait per sample


def test_a_failing_event_wait_is_reported_not_swallowed() -> None:
    nvml = _gpus(1)
    with GpuHealthReader(nvml) as reader:
        reader.start()
        nvml.fail["nvmlEventSetWait_v2"] = fake.NVMLError(fake.NVML_ERROR_GPU_IS_LOST)
        sample = reader.sample()
    assert sample["event_error"] == "nvmlEventSetWait_v2 failed: GPU is lost"


def test_cuda_visible_devices_selects_the_run_gpus() -> None:
    with GpuHealthReader(_gpus(3), "2,GPU-0") as reader:
        assert [d["index"] for d in reader.start()["devices"]] == [2, 0]
    with GpuHealthReader(_gpus(2), "7") as reader:
        start = reader.start()
    assert start["available"] is False and "CUDA_VISIBLE_DEVICES='7'" in start["reason"]


def test_older_binding_uses_the_throttle_reasons_name() -> None:
    nvml = _gpus(1, reasons=0x80)
    nvml.nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]
    with GpuHealthReader(nvml) as reader:
        reader.start()
        assert reader.sample()["devices"][0]["clock_event_reasons"]["names"] == ["HwPowerBrake"]
    driver_lacks_it = _gpus(1, reasons=0x8)
    driver_lacks_it.fail["nvmlDeviceGetCurrentClocksEventReasons"] = fake.NVMLError(
        fake.NVML_ERROR_FUNCTION_NOT_FOUND
    )
    assert health_at_start(driver_lacks_it)["devices"][0]["clock_event_reasons"]["names"] == ["HwSlowdown"]


def test_a_host_without_nvml_is_unavailable_with_the_reason() -> None:
    nvml = fake.FakeNvml([], fail={"nvmlInit": fake.NVMLError("NVML Shared Library Not Found")})
    with GpuHealthReader(nvml) as reader:
        start = reader.start()
        sample = reader.sample()
        assert reader.end_counters() == []
    assert start["available"] is False and "NVML Shared Library Not Found" in start["reason"]
    assert sample["available"] is False and sample["reason"] == start["reason"]
    at_start = health_at_start(fake.FakeNvml([], fail={"nvmlInit": fake.NVMLError("Driver Not Loaded")}))
    assert at_start == {
        "available": False,
        "reason": "NVML initialisation failed: NVMLError: Driver Not Loaded",
        "devices": [],
    }


def test_the_real_binding_on_this_host_says_why_not() -> None:
    start = GpuHealthReader().start()  # no driver here: NVML's own reason, no device, no exception
    if start["available"]:
        assert start["devices"]
    else:
        assert start["reason"] and start["devices"] == []


def test_end_counters_read_again() -> None:
    nvml = _gpus(1)
    with GpuHealthReader(nvml) as reader:
        reader.start()
        nvml.devices[0].ecc_uncorrected = 2
        end = reader.end_counters()
    assert end[0]["counters"]["ecc_volatile"]["uncorrected"] == 2


def test_a_binding_that_breaks_outside_nvml_errors_gives_no_gpu_health_and_no_crash() -> None:
    """A binding lacking a call (AttributeError, not an NVMLError) must not take the monitor down."""
    nvml = _gpus(1)
    nvml.nvmlEventSetCreate = None  # type: ignore[assignment]  # calling it raises TypeError
    with GpuHealthReader(nvml) as reader:
        start = reader.start()
        sample = reader.sample()
    assert start["available"] is False and start["reason"].startswith(
        "NVML start-up reading failed: TypeError"
    )
    assert sample["available"] is False and sample["reason"] == start["reason"]
