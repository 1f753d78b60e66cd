"""Shared NVML access: GPU devices, device memory and per-process GPU memory, or an explicit reason.

Used by the soak monitor, the phase probe and the MPS helper. It never imports torch and never guesses:
when NVML cannot be loaded or initialised, or a query fails, the answer is
``{"available": false, "reason": "<what failed>", "devices": []}``.

Snapshot shape (all memory in bytes)::

    {
      "available": bool,
      "reason": str | None,          # non-empty iff available is false
      "driver": str | None,
      "devices": [
        {"index": int, "uuid": str, "name": str, "driver": str,
         "used_bytes": int, "total_bytes": int,
         "processes": [{"pid": int, "used_bytes": int | None, "kind": "compute" | "graphics"}]}
      ]
    }

``processes[].pid`` is the PID as NVML reports it, i.e. in the host PID namespace; inside a container with a
private PID namespace it does not match ``os.getpid()``. ``used_bytes`` of a process is ``None`` when NVML
does not expose it (for example without the needed privileges). Devices are every device NVML enumerates;
NVML ignores ``CUDA_VISIBLE_DEVICES``, so callers that care record that variable separately (see
``harness.context``).

Tests inject a fake module with the same function names as ``pynvml`` (see tests/harness/fake_nvml.py).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping
from typing import Any


def _text(value: Any) -> str:
    """NVML string results are ``bytes`` in old bindings and ``str`` in new ones."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def unavailable(reason: str) -> dict[str, Any]:
    """The explicit "no NVML evidence" snapshot."""
    if not reason:
        raise ValueError("an unavailable NVML snapshot needs a non-empty reason")
    return {"available": False, "reason": reason, "driver": None, "devices": []}


def load_nvml(nvml: Any | None = None) -> tuple[Any | None, str | None]:
    """Import ``pynvml`` (unless a module is given) and call ``nvmlInit``: ``(module, None)`` or
    ``(None, reason)``. Each successful call must be paired with ``nvmlShutdown`` (NVML counts them)."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError as exc:
            return None, f"pynvml (nvidia-ml-py) is not importable: {_error_text(exc)}"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, OSError from the loader
        return None, f"NVML initialisation failed: {_error_text(exc)}"
    return nvml, None


class NvmlReader:
    """Holds one NVML initialisation across many snapshots (the soak monitor samples every few seconds).

    Initialisation is attempted on the first ``snapshot()``; if it fails, every later snapshot repeats the
    same explicit reason (no retry loop hidden behind a sample). Use as a context manager or call
    ``close()``.
    """

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml: Any = nvml
        self._initialised = False
        self._init_failure: str | None = None

    def _ensure_init(self) -> str | None:
        """Initialise NVML once; return the failure reason or ``None``."""
        if self._initialised or self._init_failure is not None:
            return self._init_failure
        nvml, self._init_failure = load_nvml(self._nvml)
        if nvml is None:
            return self._init_failure
        self._nvml, self._initialised = nvml, True
        return None

    def _processes(self, handle: Any) -> list[dict[str, Any]]:
        nvml = self._nvml
        found: list[dict[str, Any]] = []
        seen: set[tuple[int, str]] = set()
        for kind, fn_name in (
            ("compute", "nvmlDeviceGetComputeRunningProcesses"),
            ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
        ):
            fn = getattr(nvml, fn_name, None)
            if fn is None:
                if kind == "compute":
                    raise RuntimeError(f"NVML binding lacks {fn_name}")
                continue
            for proc in fn(handle):
                pid = int(proc.pid)
                if (pid, kind) in seen:
                    continue
                seen.add((pid, kind))
                used = getattr(proc, "usedGpuMemory", None)
                found.append({"pid": pid, "used_bytes": None if used is None else int(used), "kind": kind})
        return found

    def snapshot(self) -> dict[str, Any]:
        """Query every device now; see the module docstring for the shape."""
        failure = self._ensure_init()
        if failure is not None:
            return unavailable(failure)
        nvml = self._nvml
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
            count = int(nvml.nvmlDeviceGetCount())
            devices: list[dict[str, Any]] = []
            for index in range(count):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                devices.append(
                    {
                        "index": index,
                        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                        "name": _text(nvml.nvmlDeviceGetName(handle)),
                        "driver": driver,
                        "used_bytes": int(memory.used),
                        "total_bytes": int(memory.total),
                        "processes": self._processes(handle),
                    }
                )
        except Exception as exc:
            return unavailable(f"NVML query failed: {_error_text(exc)}")
        if not devices:
            return unavailable("NVML initialised but reports no GPU devices")
        return {"available": True, "reason": None, "driver": driver, "devices": devices}

    def close(self) -> None:
        """Shut NVML down if this reader initialised it; idempotent."""
        if self._initialised:
            self._initialised = False
            # A shutdown failure leaves nothing for us to release.
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def __enter__(self) -> NvmlReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def gpu_snapshot(nvml: Any | None = None) -> dict[str, Any]:
    """One-shot snapshot (initialise, query, shut down)."""
    with NvmlReader(nvml) as reader:
        return reader.snapshot()


def device_summary(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The context block's ``gpu`` view: ``{available, reason, devices: [{index, uuid, name, driver}]}``."""
    return {
        "available": bool(snapshot["available"]),
        "reason": snapshot["reason"],
        "devices": [
            {key: device[key] for key in ("index", "uuid", "name", "driver")}
            for device in snapshot["devices"]
        ],
    }


def memory_by_pid(snapshot: Mapping[str, Any]) -> dict[int, int | None]:
    """GPU memory per PID summed over devices; ``None`` for a PID whose usage NVML hides on any device.

    A PID listed as both compute and graphics on one device is counted once (the larger figure).
    Returns an empty mapping for an unavailable snapshot; callers must check ``available`` to tell
    "no GPU processes" from "no evidence".
    """
    totals: dict[int, int | None] = {}
    for device in snapshot["devices"]:
        per_device: dict[int, int | None] = {}
        for proc in device["processes"]:
            pid, used = int(proc["pid"]), proc["used_bytes"]
            if pid in per_device:
                prev = per_device[pid]
                per_device[pid] = None if prev is None or used is None else max(prev, used)
            else:
                per_device[pid] = used
        for pid, used in per_device.items():
            if pid in totals:
                prev = totals[pid]
                totals[pid] = None if prev is None or used is None else prev + used
            else:
                totals[pid] = used
    return totals


def compute_pids(snapshot: Mapping[str, Any]) -> list[int]:
    """Sorted PIDs of compute processes on any device."""
    return sorted(
        {int(p["pid"]) for d in snapshot["devices"] for p in d["processes"] if p["kind"] == "compute"}
    )
