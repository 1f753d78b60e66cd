"""A fake ``pynvml`` module object for foundation.nvml and foundation.gpu_health tests (test double: lives
only under tests/).

``FakeNvml`` holds plain per-device state that a test sets directly. ``ScriptedNvml`` drives the same state
from a JSON script on a clock that starts at the first ``nvmlInit`` (the ``pynvml`` shim in
tests/harness/soak/fake_pynvml/ loads it into a real ``soak monitor`` subprocess).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# pynvml's constants (nvml.h values) the product reads off the module
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
_ERROR_TEXT = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
}
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
THERMAL = 0x20 | 0x40  # SwThermal | HwThermal


class NVMLError(Exception):
    """Stands in for pynvml.NVMLError: built from an NVML error code (``str`` is NVML's text, ``value``
    the code) or, for older tests, from a message."""

    def __init__(self, value: int | str) -> None:
        self.value = value if isinstance(value, int) else None
        super().__init__(
            _ERROR_TEXT.get(value, f"NVML Error with code {value}") if isinstance(value, int) else value
        )


@dataclass
class FakeDevice:
    uuid: str
    name: str
    used: int
    total: int
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    sm_clock: int = 1980
    mem_clock: int = 3201
    reasons: int = 0
    temperature: int = 45
    power_mw: int = 310_000
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)
    retired_single: list[int] = field(default_factory=list)
    retired_double: list[int] = field(default_factory=list)
    pcie_replay: int = 0
    unsupported: set[str] = field(default_factory=set)  # query names that raise "Not Supported"


class FakeEventSet:
    def __init__(self) -> None:
        self.devices: list[FakeDevice] = []
        self.queue: list[tuple[FakeDevice, int]] = []


class FakeNvml:
    """Mimics the pynvml functions foundation.nvml and foundation.gpu_health call; failures are injected
    by name (``fail``, every device) or per device (``FakeDevice.unsupported``)."""

    NVMLError = NVMLError
    NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_VOLATILE_ECC = 0
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    nvmlEventTypeXidCriticalError = XID_CRITICAL

    def __init__(
        self,
        devices: list[FakeDevice],
        *,
        driver: str | bytes = "550.54.15",
        fail: dict[str, Exception] | None = None,
        has_graphics_query: bool = True,
    ) -> None:
        self.devices = devices
        self.driver = driver
        self.fail = fail or {}
        self.init_calls = 0
        self.shutdown_calls = 0
        self.event_sets: list[FakeEventSet] = []
        self.calls: dict[str, int] = {}
        if not has_graphics_query:
            self.nvmlDeviceGetGraphicsRunningProcesses = None  # type: ignore[assignment]

    def _maybe_fail(self, name: str, handle: FakeDevice | None = None) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.fail:
            raise self.fail[name]
        if handle is not None and name in handle.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def post_xid(self, device: FakeDevice, xid: int) -> None:
        """An XID error on ``device``: delivered to every event set it was registered with before now."""
        for event_set in self.event_sets:
            if device in event_set.devices:
                event_set.queue.append((device, xid))

    def nvmlInit(self) -> None:
        self._maybe_fail("nvmlInit")
        self.init_calls += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._maybe_fail("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._maybe_fail("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        self._maybe_fail("nvmlDeviceGetHandleByIndex")
        return self.devices[index]

    def nvmlDeviceGetUUID(self, handle: FakeDevice) -> str:
        return handle.uuid

    def nvmlDeviceGetName(self, handle: FakeDevice) -> bytes:
        return handle.name.encode()  # old bindings return bytes

    def nvmlDeviceGetMemoryInfo(self, handle: FakeDevice) -> Any:
        self._maybe_fail("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=handle.used, total=handle.total, free=handle.total - handle.used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeDevice) -> list[Any]:
        self._maybe_fail("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.compute]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeDevice) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.graphics]

    # GPU health (foundation.gpu_health)

    def nvmlEventSetCreate(self) -> FakeEventSet:
        self._maybe_fail("nvmlEventSetCreate")
        event_set = FakeEventSet()
        self.event_sets.append(event_set)
        return event_set

    def nvmlEventSetFree(self, event_set: FakeEventSet) -> None:
        self.event_sets.remove(event_set)

    def nvmlDeviceRegisterEvents(self, handle: FakeDevice, types: int, event_set: FakeEventSet) -> None:
        self._maybe_fail("nvmlDeviceRegisterEvents", handle)
        if types & XID_CRITICAL:
            event_set.devices.append(handle)

    def nvmlEventSetWait_v2(self, event_set: FakeEventSet, timeout_ms: int) -> Any:
        self._maybe_fail("nvmlEventSetWait_v2")
        if not event_set.queue:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        device, xid = event_set.queue.pop(0)
        return SimpleNamespace(
            device=device, eventType=XID_CRITICAL, eventData=xid, gpuInstanceId=0, computeInstanceId=0
        )

    def nvmlDeviceGetClockInfo(self, handle: FakeDevice, clock: int) -> int:
        self._maybe_fail("nvmlDeviceGetClockInfo", handle)
        return handle.sm_clock if clock == self.NVML_CLOCK_SM else handle.mem_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeDevice) -> int:
        self._maybe_fail("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return handle.reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeDevice) -> int:
        self._maybe_fail("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return handle.reasons

    def nvmlDeviceGetTemperature(self, handle: FakeDevice, sensor: int) -> int:
        self._maybe_fail("nvmlDeviceGetTemperature", handle)
        return handle.temperature

    def nvmlDeviceGetPowerUsage(self, handle: FakeDevice) -> int:
        self._maybe_fail("nvmlDeviceGetPowerUsage", handle)
        return handle.power_mw

    def nvmlDeviceGetTotalEccErrors(self, handle: FakeDevice, error_type: int, counter: int) -> int:
        self._maybe_fail("nvmlDeviceGetTotalEccErrors", handle)
        return (
            handle.ecc_uncorrected
            if error_type == self.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            else handle.ecc_corrected
        )

    def nvmlDeviceGetRemappedRows(self, handle: FakeDevice) -> tuple[int, int, int, int]:
        self._maybe_fail("nvmlDeviceGetRemappedRows", handle)
        return handle.remapped

    def nvmlDeviceGetRetiredPages(self, handle: FakeDevice, cause: int) -> list[int]:
        self._maybe_fail("nvmlDeviceGetRetiredPages", handle)
        return handle.retired_single if cause == 0 else handle.retired_double

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeDevice) -> int:
        self._maybe_fail("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return 0

    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeDevice) -> int:
        self._maybe_fail("nvmlDeviceGetPcieReplayCounter", handle)
        return handle.pcie_replay


_STATE_KEYS = (
    "sm_clock", "mem_clock", "reasons", "temperature", "power_mw", "ecc_corrected", "ecc_uncorrected",
    "pcie_replay",
)  # fmt: skip


class ScriptedNvml(FakeNvml):
    """A FakeNvml whose devices follow a JSON script on a clock started by the first ``nvmlInit``::

        {"devices": [{"uuid", "name", "state": {sm_clock, mem_clock, reasons, temperature, power_mw,
                       ecc_corrected, ecc_uncorrected, pcie_replay},
                      "unsupported": [query name, ...],
                      "timeline": [{"at_s": 2.5, "set": {state key: value}}],
                      "xid": [{"at_s": 1.0, "xid": 79, "touch": "/abs/marker"}]}]}

    Due timeline entries and XID events are applied before every query. ``touch`` names a file written
    when the event is delivered by ``nvmlEventSetWait_v2``: a program can wait for it, so the monitor has
    drained the event before the program acts on it.
    """

    def __init__(self, script: dict[str, Any], clock: Callable[[], float] = time.monotonic) -> None:
        specs = script["devices"]
        devices = [
            FakeDevice(s["uuid"], s["name"], 0, 80 << 30, unsupported=set(s.get("unsupported", [])))
            for s in specs
        ]
        super().__init__(devices)
        for device, spec in zip(devices, specs, strict=True):
            self._apply(device, spec.get("state", {}))
        self._specs = specs
        self._clock = clock
        self._t0: float | None = None
        self._done: set[tuple[int, str, int]] = set()
        self._touch: dict[tuple[str, int], str] = {}

    @classmethod
    def from_file(cls, path: str) -> ScriptedNvml:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    @staticmethod
    def _apply(device: FakeDevice, state: dict[str, Any]) -> None:
        for key, value in state.items():
            if key not in _STATE_KEYS:
                raise KeyError(f"fake NVML script: unknown device state {key!r}")
            setattr(device, key, value)

    def _advance(self) -> None:
        if self._t0 is None:
            return
        now = self._clock() - self._t0
        for device, spec in zip(self.devices, self._specs, strict=True):
            for kind in ("timeline", "xid"):
                for number, entry in enumerate(spec.get(kind, [])):
                    key = (id(device), kind, number)
                    if key in self._done or entry["at_s"] > now:
                        continue
                    self._done.add(key)
                    if kind == "timeline":
                        self._apply(device, entry["set"])
                    else:
                        self.post_xid(device, int(entry["xid"]))
                        if "touch" in entry:
                            self._touch[(device.uuid, int(entry["xid"]))] = entry["touch"]

    def _maybe_fail(self, name: str, handle: FakeDevice | None = None) -> None:
        self._advance()
        super()._maybe_fail(name, handle)

    def nvmlInit(self) -> None:
        super().nvmlInit()
        if self._t0 is None:
            self._t0 = self._clock()

    def nvmlEventSetWait_v2(self, event_set: FakeEventSet, timeout_ms: int) -> Any:
        data = super().nvmlEventSetWait_v2(event_set, timeout_ms)
        marker = self._touch.pop((data.device.uuid, data.eventData), None)
        if marker is not None:
            Path(marker).write_text("delivered\n", encoding="utf-8")
        return data
