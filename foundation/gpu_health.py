"""GPU health from NVML: critical XID events, ECC and retirement counters, and per sample the clocks, the
reasons NVML gives for holding them down, temperature and power draw.

Never imports torch and never guesses. Every figure is NVML's answer or ``{"not_observable": "<NVML's
reason>"}`` (``"Not Supported"`` on a card without ECC, for example), never a 0 standing in for a query
that failed. A host where NVML cannot be loaded or initialised gives ``available: false`` with the reason.

The GPUs read are the ones a CUDA process would see: those ``CUDA_VISIBLE_DEVICES`` names (indices or UUID
prefixes, read as ``foundation.mps.visible_gpus`` reads them), or every GPU when it is unset.

XID events: ``start()`` creates an event set and registers every GPU for ``nvmlEventTypeXidCriticalError``
before it reads anything else, because NVML delivers only the events that happen after registration.
``drain()`` calls ``nvmlEventSetWait_v2`` with a 0 ms timeout until NVML says ``Timeout``, so a sample never
waits for an event. A GPU whose registration NVML refuses keeps ``xid_events: {"not_observable": ...}``;
the event set stays usable for the others (NVML's documented behaviour).

Shapes (plain JSON; NO is ``{"not_observable": reason}``)::

    start() -> {"available": bool, "reason": str | None, "cuda_visible_devices": str | None,
                "devices": [{"index", "uuid", "name", "xid_events": {"registered": true} | NO,
                             "counters": COUNTERS, "reading": READING}]}
    end_counters() -> [{"index", "uuid", "counters": COUNTERS}]
    sample() -> {"available", "reason", "devices": [READING],
                 "xid_events": [{"xid", "index", "uuid"}], "event_error": str | None}
    COUNTERS = {"ecc_volatile": {"corrected": int | NO, "uncorrected": int | NO},
                "remapped_rows": {"correctable", "uncorrectable", "pending", "failure"} | NO,
                "retired_pages": {"single_bit_ecc", "double_bit_ecc", "pending"} | NO,
                "pcie_replay_counter": int | NO}
    READING = {"index", "uuid", "sm_clock_mhz": int | NO, "mem_clock_mhz": int | NO,
               "clock_event_reasons": {"mask": int, "names": [str]} | NO, "temperature_c": int | NO,
               "power_w": float | NO, "ecc_uncorrected": int | NO}

Tests inject a fake module with pynvml's names (tests/harness/fake_nvml.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soakbench.foundation.mps import visible_gpus
from soakbench.foundation.nvml import load_nvml

#: NVML's clock-event reason bits (nvml.h, ``nvmlClocksEventReason*``; the same bits as the older
#: ``nvmlClocksThrottleReason*``), under the short names the soak reports.
CLOCK_EVENT_REASONS: tuple[tuple[str, int], ...] = (
    ("GpuIdle", 0x1),
    ("ApplicationsClocksSetting", 0x2),
    ("SwPowerCap", 0x4),
    ("HwSlowdown", 0x8),
    ("SyncBoost", 0x10),
    ("SwThermal", 0x20),
    ("HwThermal", 0x40),
    ("HwPowerBrake", 0x80),
    ("DisplayClockSetting", 0x100),
)
_KNOWN_BITS = sum(bit for _, bit in CLOCK_EVENT_REASONS)
_FUNCTION_NOT_FOUND = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: the driver lacks the newer symbol
_DRAIN_LIMIT = 256  # events taken per drain; more wait for the next one, so a storm cannot stall a sample


def decode_reasons(mask: int) -> list[str]:
    """The names of the bits set in a clock-event reasons mask; an unknown bit as ``unknown(0x...)``."""
    names = [name for name, bit in CLOCK_EVENT_REASONS if mask & bit]
    rest = mask & ~_KNOWN_BITS
    return [*names, f"unknown(0x{rest:x})"] if rest else names


def not_observable(exc: BaseException) -> dict[str, str]:
    """A figure NVML did not give, with NVML's own words for why."""
    return {"not_observable": str(exc).strip() or type(exc).__name__}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class _Gpu:
    index: int
    uuid: str
    name: str
    handle: Any


class GpuHealthReader:
    """One NVML session over the GPUs a run uses: ``start()`` once, ``sample()`` per sample,
    ``end_counters()`` and a last ``drain()`` at the end, then ``close()`` (also a context manager)."""

    def __init__(self, nvml: Any | None = None, cuda_visible_devices: str | None = None) -> None:
        self._module = nvml
        self._nvml: Any = None
        self._cvd = cuda_visible_devices
        self._gpus: list[_Gpu] = []
        self._event_set: Any = None
        self._errors: tuple[type[BaseException], ...] = (Exception,)
        self._reasons_fn: Callable[[Any], Any] | None = None
        self.reason: str | None = "not started"

    def open(self) -> bool:
        """Initialise NVML and pick the run's GPUs; False with ``reason`` set when there are none."""
        nvml, reason = load_nvml(self._module)
        if nvml is None:
            self.reason = reason
            return False
        self._nvml = nvml
        error = getattr(nvml, "NVMLError", None)
        self._errors = (
            (error,) if isinstance(error, type) and issubclass(error, BaseException) else (Exception,)
        )
        try:
            self._gpus = self._select()
        except Exception as exc:  # any failure here means no GPU health, said with why, never a crash
            self.reason = f"NVML query failed: {type(exc).__name__}: {exc}"
        else:
            self.reason = None if self._gpus else self._no_gpu_reason()
        if self.reason is not None:
            self.close()
            return False
        self._reasons_fn = self._resolve_reasons()
        return True

    def _no_gpu_reason(self) -> str:
        if self._cvd is None:
            return "NVML initialised but reports no GPU devices"
        return f"CUDA_VISIBLE_DEVICES={self._cvd!r} names no GPU that NVML reports"

    def _select(self) -> list[_Gpu]:
        nvml = self._nvml
        found = []
        for index in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid, name = _text(nvml.nvmlDeviceGetUUID(handle)), _text(nvml.nvmlDeviceGetName(handle))
            found.append(_Gpu(index, uuid, name, handle))
        by_index = {g.index: g for g in found}
        # in CUDA's order: the run's cuda:0 first
        return [by_index[g.index] for g in visible_gpus({"devices": [vars(g) for g in found]}, self._cvd)]

    def _resolve_reasons(self) -> Callable[[Any], Any] | None:
        """The newer ``...ClocksEventReasons`` unless the binding or the driver lacks it, then the
        older ``...ClocksThrottleReasons`` (same bits)."""
        nvml = self._nvml
        new = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        old = getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        if new is None or old is None:
            return new or old
        try:
            new(self._gpus[0].handle)
        except self._errors as exc:
            if getattr(exc, "value", None) == _FUNCTION_NOT_FOUND:
                return old  # type: ignore[no-any-return]
        return new  # type: ignore[no-any-return]

    @property
    def cuda_visible_devices(self) -> str | None:
        return self._cvd

    def start(self) -> dict[str, Any]:
        """Open, register for critical XID events first, then the counters and one reading per GPU."""
        head: dict[str, Any] = {"cuda_visible_devices": self._cvd}
        if not self.open():
            return {"available": False, "reason": self.reason, **head, "devices": []}
        try:
            registered = self._register()
            devices = [
                {
                    "index": g.index,
                    "uuid": g.uuid,
                    "name": g.name,
                    "xid_events": registered[g.uuid],
                    "counters": self._counters(g),
                    "reading": self._reading(g),
                }
                for g in self._gpus
            ]
        except Exception as exc:  # not an NVMLError (a binding without a call): no GPU health, said with why
            self.reason = f"NVML start-up reading failed: {type(exc).__name__}: {exc}"
            self.close()
            return {"available": False, "reason": self.reason, **head, "devices": []}
        return {"available": True, "reason": None, **head, "devices": devices}

    def _register(self) -> dict[str, dict[str, Any]]:
        nvml = self._nvml
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except self._errors as exc:
            return {g.uuid: not_observable(exc) for g in self._gpus}
        out: dict[str, dict[str, Any]] = {}
        for g in self._gpus:
            try:
                nvml.nvmlDeviceRegisterEvents(g.handle, nvml.nvmlEventTypeXidCriticalError, self._event_set)
                out[g.uuid] = {"registered": True}
            except self._errors as exc:
                out[g.uuid] = not_observable(exc)
        if not any("registered" in v for v in out.values()):
            self._free_event_set()  # nothing to wait on: no drain call per sample
        return out

    def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            return not_observable(exc)

    def _int(self, fn: Callable[..., Any], *args: Any) -> Any:
        value = self._read(fn, *args)
        return value if isinstance(value, dict) else int(value)

    def _ecc(self, handle: Any, error_type: int) -> Any:
        nvml = self._nvml
        return self._int(nvml.nvmlDeviceGetTotalEccErrors, handle, error_type, nvml.NVML_VOLATILE_ECC)

    def _counters(self, g: _Gpu) -> dict[str, Any]:
        nvml = self._nvml
        return {
            "ecc_volatile": {
                "corrected": self._ecc(g.handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                "uncorrected": self._ecc(g.handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
            },
            "remapped_rows": self._remapped_rows(g.handle),
            "retired_pages": self._retired_pages(g.handle),
            "pcie_replay_counter": self._int(nvml.nvmlDeviceGetPcieReplayCounter, g.handle),
        }

    def _remapped_rows(self, handle: Any) -> dict[str, Any]:
        rows = self._read(self._nvml.nvmlDeviceGetRemappedRows, handle)
        if isinstance(rows, dict):
            return rows
        correctable, uncorrectable, pending, failure = rows
        return {
            "correctable": int(correctable),
            "uncorrectable": int(uncorrectable),
            "pending": bool(pending),
            "failure": bool(failure),
        }

    def _retired_pages(self, handle: Any) -> dict[str, Any]:
        nvml = self._nvml
        try:
            single = nvml.nvmlDeviceGetRetiredPages(
                handle, nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
            )
            double = nvml.nvmlDeviceGetRetiredPages(
                handle, nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            )
            pending = nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle)
        except self._errors as exc:  # cards with row remapping (A100 and later) report this instead
            return not_observable(exc)
        return {"single_bit_ecc": len(single), "double_bit_ecc": len(double), "pending": bool(pending)}

    def _reading(self, g: _Gpu) -> dict[str, Any]:
        nvml, handle = self._nvml, g.handle
        return {
            "index": g.index,
            "uuid": g.uuid,
            "sm_clock_mhz": self._int(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": self._int(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
            "clock_event_reasons": self._reasons(handle),
            "temperature_c": self._int(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": self._watts(handle),
            "ecc_uncorrected": self._ecc(handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        }

    def _reasons(self, handle: Any) -> dict[str, Any]:
        if self._reasons_fn is None:
            return {"not_observable": "the NVML binding has no clock-event reasons query"}
        mask = self._read(self._reasons_fn, handle)
        return mask if isinstance(mask, dict) else {"mask": int(mask), "names": decode_reasons(int(mask))}

    def _watts(self, handle: Any) -> Any:
        milliwatts = self._read(self._nvml.nvmlDeviceGetPowerUsage, handle)
        return milliwatts if isinstance(milliwatts, dict) else round(int(milliwatts) / 1000.0, 3)

    def sample(self) -> dict[str, Any]:
        """One reading per GPU and the XID events that arrived since the last drain."""
        if self._nvml is None:
            return {
                "available": False,
                "reason": self.reason,
                "devices": [],
                "xid_events": [],
                "event_error": None,
            }
        devices = [self._reading(g) for g in self._gpus]
        events, error = self.drain()
        return {
            "available": True,
            "reason": None,
            "devices": devices,
            "xid_events": events,
            "event_error": error,
        }

    def drain(self) -> tuple[list[dict[str, Any]], str | None]:
        """The critical XID events waiting now (never blocks), and why the wait failed if it did."""
        if self._event_set is None:
            return [], None
        nvml = self._nvml
        events: list[dict[str, Any]] = []
        for _ in range(_DRAIN_LIMIT):
            try:
                data = nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except self._errors as exc:
                if getattr(exc, "value", None) == nvml.NVML_ERROR_TIMEOUT:
                    return events, None
                return events, f"nvmlEventSetWait_v2 failed: {exc}"
            if int(data.eventType) & nvml.nvmlEventTypeXidCriticalError:
                events.append(self._event(data))
        return events, None

    def _event(self, data: Any) -> dict[str, Any]:
        uuid = self._read(self._nvml.nvmlDeviceGetUUID, data.device)
        uuid = None if isinstance(uuid, dict) else _text(uuid)
        index = next((g.index for g in self._gpus if g.uuid == uuid), None)
        return {"xid": int(data.eventData), "index": index, "uuid": uuid}

    def end_counters(self) -> list[dict[str, Any]]:
        """The counters of ``start()`` read again (empty when NVML was not available)."""
        if self._nvml is None:
            return []
        return [{"index": g.index, "uuid": g.uuid, "counters": self._counters(g)} for g in self._gpus]

    def _free_event_set(self) -> None:
        if self._event_set is not None:
            with contextlib.suppress(Exception):  # nothing of ours is left to release on failure
                self._nvml.nvmlEventSetFree(self._event_set)
            self._event_set = None

    def close(self) -> None:
        """Free the event set and shut NVML down (once); idempotent."""
        if self._nvml is None:
            return
        self._free_event_set()
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()
        self._nvml = None

    def __enter__(self) -> GpuHealthReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def health_at_start(nvml: Any | None = None, cuda_visible_devices: str | None = None) -> dict[str, Any]:
    """Clock-event reasons and temperature of the run's GPUs now (``cumps doctor``, the run context):
    ``{available, reason, devices: [{index, uuid, clock_event_reasons, temperature_c}]}``."""
    with GpuHealthReader(nvml, cuda_visible_devices) as reader:
        if not reader.open():
            return {"available": False, "reason": reader.reason, "devices": []}
        return brief(reader.sample()["devices"])


def brief(readings: list[dict[str, Any]]) -> dict[str, Any]:
    """The at-start view of some readings: reasons and temperature per GPU."""
    keys = ("index", "uuid", "clock_event_reasons", "temperature_c")
    return {"available": True, "reason": None, "devices": [{k: r[k] for k in keys} for r in readings]}
