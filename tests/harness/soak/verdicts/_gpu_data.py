"""GPU health records as harness.soak.host.gpu_watch writes them, built from a few numbers (test data)."""

from __future__ import annotations

from typing import Any

NOT_SUPPORTED = {"not_observable": "Not Supported"}
_BITS = {"SwPowerCap": 0x4, "HwSlowdown": 0x8, "SwThermal": 0x20, "HwThermal": 0x40, "HwPowerBrake": 0x80}


def counters(uncorrected: Any = 0) -> dict[str, Any]:
    return {
        "ecc_volatile": {"corrected": 0, "uncorrected": uncorrected},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "retired_pages": NOT_SUPPORTED,
        "pcie_replay_counter": 0,
    }


def device(index: int = 0, *, start: Any = 0, end: Any = 0, registered: bool = True) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "NVIDIA H200",
        "xid_events": {"registered": True} if registered else NOT_SUPPORTED,
        "start": counters(start),
        "end": counters(end),
        "at_start": {"clock_event_reasons": {"mask": 1, "names": ["GpuIdle"]}, "temperature_c": 41},
    }


def raw(
    devices: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "available": True,
        "reason": None,
        "cuda_visible_devices": None,
        "devices": [device()] if devices is None else devices,
        "xid_events": events or [],
        "event_errors": errors or [],
    }


def unavailable(reason: str = "NVML initialisation failed: NVMLError: Driver Not Loaded") -> dict[str, Any]:
    return {**raw([]), "available": False, "reason": reason}


def xid(number: int, t: float, index: int = 0) -> dict[str, Any]:
    return {
        "xid": number,
        "index": index,
        "uuid": f"GPU-{index}",
        "after_t": t - 0.5,
        "t": t,
        "wall": 1.7e9 + t,
    }


def reading(index: int = 0, reasons: tuple[str, ...] = (), ecc: Any = 0, mask: Any = None) -> dict[str, Any]:
    names = list(reasons)
    return {
        "index": index,
        "uuid": f"GPU-{index}",
        "sm_clock_mhz": 1980 if not reasons else 1100,
        "mem_clock_mhz": 3201,
        "clock_event_reasons": mask
        if mask is not None
        else {"mask": sum(_BITS[n] for n in names), "names": names},
        "temperature_c": 90 if reasons else 50,
        "power_w": 300.0,
        "ecc_uncorrected": ecc,
    }


def sample(t: float, *readings: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    record = {"available": True, "reason": None, "devices": list(readings or (reading(),))}
    return {"t": t, "progress": progress, "gpu_health": {**record, "xid_events": [], "event_error": None}}
