"""The probe over both backends on CPU: mjwarp on Warp's CPU diagnostic device next to mujoco (slow: Warp
kernel compile on first use), each in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.harness.probe.artifact import validate_artifact

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_mjwarp_cpu_lane_and_mujoco_in_separate_processes(tmp_path: Path) -> None:
    out = tmp_path / "both.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "soakbench.harness.probe", "--backends", "mjwarp,mujoco", "--mjwarp-device", "cpu",
            "--num-envs", "8", "--warmup", "1", "--iters", "3", "--processes", "1", "--output", str(out),
        ],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    artifact = json.loads(out.read_text())
    validate_artifact(artifact)
    mjwarp, mujoco = (artifact["backends"][name]["processes"][0] for name in ("mjwarp", "mujoco"))

    pids = {mjwarp["pid"], mujoco["pid"]}
    assert len(pids) == 2 and os.getpid() not in pids and artifact["probe_pid"] not in pids

    assert mjwarp["device"] == "cpu" and mjwarp["diagnostic_lane"] is True
    assert mjwarp["data_plane"] == "device" and mujoco["data_plane"] == "host_bridge"
    graph = mjwarp["backend_diagnostics"]["diagnostics"]["cuda_graph"]
    assert graph["enabled"] is False and "cpu" in graph["disable_reason"]
    assert mjwarp["physics_limit"]["cuda_graph"] is False
    assert mjwarp["physics_limit"]["worlds"] == 8 == mujoco["physics_limit"]["worlds"]
    # the device data plane makes no counted host copies while stepping
    assert mjwarp["transfers"]["counters_total"] == {} and mjwarp["transfers"]["within_inventory"] is True
    assert mjwarp["physics_warnings"] is None and mujoco["physics_warnings"] is not None
    for result in (mjwarp, mujoco):
        assert result["phases"]["iteration_ms"]["count"] == 3
        assert result["efficiency"] > 0
