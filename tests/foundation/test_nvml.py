"""foundation.nvml against a fake NVML module: explicit unavailability, device and per-process memory."""

from __future__ import annotations

from typing import Any

import pytest

from soakbench.foundation.nvml import (
    NvmlReader,
    compute_pids,
    device_summary,
    gpu_snapshot,
    memory_by_pid,
    unavailable,
)
from tests.harness import fake_nvml as fake

GIB = 1 << 30


def _two_gpus() -> Any:
    return fake.FakeNvml(
        [
            fake.FakeDevice(
                "GPU-aaa", "NVIDIA H200", used=3 * GIB, total=140 * GIB, compute=[(100, GIB), (200, None)]
            ),
            fake.FakeDevice(
                "GPU-bbb",
                "NVIDIA H200",
                used=GIB,
                total=140 * GIB,
                compute=[(100, 2 * GIB)],
                graphics=[(300, 5)],
            ),
        ],
        driver=b"550.54.15",
    )


def test_snapshot_reports_devices_memory_and_processes() -> None:
    nvml = _two_gpus()
    snap = gpu_snapshot(nvml)
    assert snap["available"] is True and snap["reason"] is None
    assert snap["driver"] == "550.54.15"
    assert [d["uuid"] for d in snap["devices"]] == ["GPU-aaa", "GPU-bbb"]
    assert snap["devices"][0]["name"] == "NVIDIA H200"  # bytes decoded
    assert snap["devices"][0]["used_bytes"] == 3 * GIB
    assert snap["devices"][1]["processes"] == [
        {"pid": 100, "used_bytes": 2 * GIB, "kind": "compute"},
        {"pid": 300, "used_bytes": 5, "kind": "graphics"},
    ]
    assert nvml.init_calls == 1 and nvml.shutdown_calls == 1


def test_memory_by_pid_sums_devices_and_keeps_unknown_as_none() -> None:
    snap = gpu_snapshot(_two_gpus())
    assert memory_by_pid(snap) == {100: 3 * GIB, 200: None, 300: 5}
    assert compute_pids(snap) == [100, 200]


def test_summary_has_only_the_context_fields() -> None:
    summary = device_summary(gpu_snapshot(_two_gpus()))
    assert summary["available"] is True
    assert summary["devices"][0] == {
        "index": 0,
        "uuid": "GPU-aaa",
        "name": "NVIDIA H200",
        "driver": "550.54.15",
    }


def test_init_failure_is_explicit_and_sticky() -> None:
    nvml = fake.FakeNvml([], fail={"nvmlInit": fake.NVMLError("Driver Not Loaded")})
    with NvmlReader(nvml) as reader:
        first = reader.snapshot()
        second = reader.snapshot()
    assert first == second
    assert first["available"] is False and first["devices"] == []
    assert "NVML initialisation failed" in first["reason"] and "Driver Not Loaded" in first["reason"]
    assert nvml.shutdown_calls == 0  # never initialised, nothing to shut down


def test_no_devices_is_unavailable_not_an_empty_success() -> None:
    snap = gpu_snapshot(fake.FakeNvml([]))
    assert snap["available"] is False
    assert "no GPU devices" in snap["reason"]
    assert memory_by_pid(snap) == {}


def test_query_failure_mid_snapshot_is_unavailable() -> None:
    nvml = fake.FakeNvml(
        [fake.FakeDevice("GPU-a", "x", 1, 2)], fail={"nvmlDeviceGetMemoryInfo": fake.NVMLError("GPU is lost")}
    )
    snap = gpu_snapshot(nvml)
    assert snap["available"] is False
    assert snap["reason"].startswith("NVML query failed") and "GPU is lost" in snap["reason"]


def test_reader_reuses_one_init_across_snapshots() -> None:
    nvml = _two_gpus()
    with NvmlReader(nvml) as reader:
        for _ in range(3):
            assert reader.snapshot()["available"] is True
    assert nvml.init_calls == 1 and nvml.shutdown_calls == 1


def test_binding_without_graphics_query_still_reports_compute() -> None:
    nvml = fake.FakeNvml([fake.FakeDevice("GPU-a", "x", 1, 2, compute=[(7, 8)])], has_graphics_query=False)
    assert memory_by_pid(gpu_snapshot(nvml)) == {7: 8}


def test_unavailable_requires_a_reason() -> None:
    with pytest.raises(ValueError):
        unavailable("")


def test_real_pynvml_answers_without_guessing() -> None:
    """On any host: either real devices or an explicit reason, never an empty success."""
    snap = gpu_snapshot()
    if snap["available"]:
        assert snap["devices"] and snap["reason"] is None
    else:
        assert snap["reason"] and snap["devices"] == []
