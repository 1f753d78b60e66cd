"""The limits a long run would die of, read once as the monitor's command starts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soakbench.foundation.nvml import NvmlReader
from soakbench.harness.soak.host.limits import read_limits
from soakbench.harness.soak.host.sampling import ProcessSampler
from soakbench.harness.soak.loop.settings import MonitorSettings


def limits_at_spawn(
    root_pid: int, settings: MonitorSettings, reader: ProcessSampler, nvml: NvmlReader
) -> dict[str, Any]:
    """The limits that would end a long run, read where they are set as the run starts
    (harness.soak.host.limits): the log dir and every watched path, /dev/shm, the GPUs' totals."""
    snap = nvml.snapshot()
    totals = (
        [(int(d["index"]), int(d["total_bytes"])) for d in snap["devices"]] if snap["available"] else None
    )
    return read_limits(
        root_pid=root_pid,
        watch_paths=(settings.log_dir, *settings.watch_paths),
        shm_root=reader.capabilities.shm_root,
        gpu_totals=totals,
        gpu_reason=None if snap["available"] else str(snap["reason"] or "NVML unavailable"),
    ).to_json()


def domain_files(limits: Mapping[str, Any]) -> dict[str, Path]:
    """resource -> the usage file of its tightest domain limit (the sampler reads it every sample)."""
    files: dict[str, Path] = {}
    observed = [item for item in limits["limits"] if item.get("usage_file") and item.get("value") is not None]
    for item in sorted(observed, key=lambda item: int(item["value"]) - int(item.get("in_use") or 0)):
        files.setdefault(str(item["resource"]), Path(item["usage_file"]))
    return files
