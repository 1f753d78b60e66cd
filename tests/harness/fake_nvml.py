"""A fake ``pynvml`` module object for foundation.nvml tests (test double: lives only under tests/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


@dataclass
class FakeDevice:
    uuid: str
    name: str
    used: int
    total: int
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)


class FakeNvml:
    """Mimics the pynvml functions foundation.nvml calls; failures are injected by name."""

    NVMLError = NVMLError

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
        if not has_graphics_query:
            self.nvmlDeviceGetGraphicsRunningProcesses = None  # type: ignore[assignment]

    def _maybe_fail(self, name: str) -> None:
        if name in self.fail:
            raise self.fail[name]

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
