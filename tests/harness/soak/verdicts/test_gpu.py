"""The GPU rows of the pass table (harness/soak/verdicts/gpu.py) on data: XID events, uncorrected ECC,
throttling, the drift note, and not_applicable with NVML's reason wherever NVML cannot say."""

from __future__ import annotations

from typing import Any

from soakbench.harness.soak.verdicts.gpu import (
    GPU_ROWS,
    annotate_drift,
    assess_gpu,
    died_after_xid,
    ecc_text,
    gpu_rows,
    throttle_summary,
    xid_text,
)
from tests.harness.soak.verdicts import _gpu_data as data


def rows(raw: dict[str, Any] | None, samples: list[dict[str, Any]], gate: bool = False) -> dict[str, Any]:
    return {c.name: c for c in gpu_rows(assess_gpu(raw, samples), gate)}


HEALTHY = [data.sample(float(t)) for t in range(10)]


def test_a_healthy_gpu_passes_xid_and_ecc_and_reports_no_throttle() -> None:
    found = rows(data.raw(), HEALTHY)
    assert list(found) == list(GPU_ROWS)
    assert found["gpu_xid_errors"].result == "pass"
    assert found["gpu_ecc_uncorrected"].result == "pass"
    throttle = found["gpu_throttle"]
    assert throttle.result == "not_applicable"  # information unless the gate is on
    assert throttle.value["share"] == 0.0 and throttle.value["samples_judged"] == 10
    assert rows(data.raw(), HEALTHY, gate=True)["gpu_throttle"].result == "pass"


def test_a_critical_xid_fails_naming_the_number_the_gpu_and_the_time() -> None:
    found = rows(data.raw(events=[data.xid(79, 12.5)]), HEALTHY)["gpu_xid_errors"]
    assert found.result == "fail"
    assert found.value["events"][0]["xid"] == 79
    text = xid_text(found.value)
    assert text.startswith("critical XID 79 on GPU 0 (GPU-0) between t=12.0 s and t=12.5 s (")
    assert text.endswith("Z)")


def test_a_failed_event_wait_fails_closed() -> None:
    errors = [{"t": 3.0, "error": "nvmlEventSetWait_v2 failed: GPU is lost"}]
    found = rows(data.raw(errors=errors), HEALTHY)["gpu_xid_errors"]
    assert found.result == "fail" and found.value["event_errors"] == errors


def test_xid_not_observable_where_registration_was_refused() -> None:
    found = rows(data.raw([data.device(registered=False)]), HEALTHY)["gpu_xid_errors"]
    assert found.result == "not_applicable" and found.value == "not observable: GPU 0: Not Supported"
    two = rows(data.raw([data.device(0, registered=False), data.device(1)]), HEALTHY)["gpu_xid_errors"]
    assert two.result == "pass" and two.value["not_observable"] == {"0": "Not Supported"}


def test_an_uncorrected_ecc_increase_fails_and_says_when() -> None:
    samples = [data.sample(1.0), data.sample(2.0, data.reading(ecc=2)), data.sample(3.0, data.reading(ecc=2))]
    found = rows(data.raw([data.device(start=0, end=2)]), samples)["gpu_ecc_uncorrected"]
    assert found.result == "fail"
    assert found.value["0"] == {"start": 0, "end": 2, "max_seen": 2, "increase": 2, "first_increase_t": 2.0}
    assert ecc_text(found.value) == (
        "volatile uncorrected ECC errors rose over the run: GPU 0: 0 -> 2 (first seen at t=2.0 s)"
    )


def test_an_increase_seen_only_in_samples_still_fails_when_the_end_read_failed() -> None:
    samples = [data.sample(1.0, data.reading(ecc=1))]
    device = data.device(start=0, end=data.NOT_SUPPORTED)
    assert rows(data.raw([device]), samples)["gpu_ecc_uncorrected"].result == "fail"


def test_ecc_not_supported_is_not_applicable_with_nvmls_reason() -> None:
    device = data.device(start=data.NOT_SUPPORTED, end=data.NOT_SUPPORTED)
    samples = [data.sample(1.0, data.reading(ecc=data.NOT_SUPPORTED))]
    found = rows(data.raw([device]), samples)["gpu_ecc_uncorrected"]
    assert found.result == "not_applicable" and found.value == "not observable: GPU 0: Not Supported"


def test_throttle_share_counts_thermal_power_brake_and_slowdown_not_the_power_cap() -> None:
    samples = [
        data.sample(0.0, data.reading(reasons=("SwPowerCap",))),
        data.sample(1.0, data.reading(reasons=("SwThermal", "HwThermal"))),
        data.sample(2.0, data.reading(reasons=("HwThermal",))),
        data.sample(3.0),
        data.sample(4.0, data.reading(reasons=("HwPowerBrake",))),
    ]
    summary = throttle_summary(samples)
    assert summary["samples_judged"] == 5 and summary["samples_throttled"] == 3 and summary["share"] == 0.6
    assert summary["reasons"] == {"HwPowerBrake": 1, "HwThermal": 2, "SwThermal": 1}
    assert summary["episodes"] == [
        {"index": 0, "uuid": "GPU-0", "t_start": 1.0, "t_end": 2.0, "reasons": ["HwThermal", "SwThermal"]},
        {"index": 0, "uuid": "GPU-0", "t_start": 4.0, "t_end": 4.0, "reasons": ["HwPowerBrake"]},
    ]
    gated = rows(data.raw(), samples, gate=True)["gpu_throttle"]
    assert gated.result == "fail" and gated.value["share"] == 0.6


def test_throttle_not_observable_on_every_gpu_is_not_applicable_even_under_the_gate() -> None:
    samples = [data.sample(float(t), data.reading(mask=data.NOT_SUPPORTED)) for t in range(3)]
    found = rows(data.raw(), samples, gate=True)["gpu_throttle"]
    assert found.result == "not_applicable" and found.value == "not observable: GPU 0: Not Supported"


def test_without_nvml_every_row_is_not_applicable_with_the_reason() -> None:
    off = data.unavailable()
    samples = [{"t": 1.0, "gpu_health": {"available": False, "reason": off["reason"], "devices": []}}]
    found = rows(off, samples, gate=True)
    assert {c.result for c in found.values()} == {"not_applicable"}
    assert all(c.value == f"not observable: {off['reason']}" for c in found.values())
    assert {c.value for c in gpu_rows(None, True)} == {"no GPU health record"}


def test_died_after_xid_needs_an_event_and_a_non_zero_exit() -> None:
    with_event = assess_gpu(data.raw(events=[data.xid(79, 3.0)]), HEALTHY)
    assert (
        died_after_xid(with_event, 1) and died_after_xid(with_event, -15) and died_after_xid(with_event, None)
    )
    assert not died_after_xid(with_event, 0)
    assert not died_after_xid(assess_gpu(data.raw(), HEALTHY), 1)


def _declining(t_start: float = 10.0, t_end: float = 30.0) -> dict[str, Any]:
    return {
        "verdict": "declining",
        "reason": "env steps/s -40.0 % over the window",
        "window": {"t_start": t_start, "t_end": t_end},
    }


def test_drift_reason_names_throttling_that_coincides_with_the_decline() -> None:
    samples = [
        data.sample(float(t), data.reading(reasons=("HwThermal",) if t >= 15 else ())) for t in range(31)
    ]
    noted = annotate_drift(_declining(), throttle_summary(samples))
    assert noted["reason"] == (
        "env steps/s -40.0 % over the window; GPU throttling coincides with the decline: HwThermal on GPU 0 "
        "from t=15.0 s, inside the trend window 10.0-30.0 s"
    )
    early = [data.sample(float(t), data.reading(reasons=("HwThermal",) if t < 5 else ())) for t in range(31)]
    assert annotate_drift(_declining(), throttle_summary(early))["reason"] == _declining()["reason"]
    stable = {**_declining(), "verdict": "stable"}
    assert annotate_drift(stable, throttle_summary(samples)) == stable
    assert annotate_drift(_declining(), None) == _declining()
