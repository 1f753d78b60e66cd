"""The `train` console script: --print-config and fail-closed exits, run as a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = [sys.executable, "-m", "soakbench.runtime.cli"]
CANONICAL = ["--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mjwarp"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRAIN, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


def test_print_config_shows_effective_settings_and_imports_no_physics() -> None:
    probe = (
        "import sys; from soakbench.runtime.cli import main; sys.argv=['train', *sys.argv[1:]];\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "assert 'mujoco' not in sys.modules and 'warp' not in sys.modules, 'physics imported'\n"
        "sys.exit(code)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *CANONICAL, "--print-config"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "G1MotionTracking" in out
    assert "Backend identity" in out and "mjwarp" in out
    assert "training.inference_slot_capacity=1" in out
    assert "training.replay_ingress_depth=2" in out
    assert "2048 (training.replay_ingress_slot_rows=null)" in out
    assert "training.collector_metrics_interval=100" in out
    assert "training.cuda_process_sharing=null" in out
    assert "robots/g1/scene_flat.xml" in out


@pytest.mark.parametrize(
    "override",
    [
        "training.sim_backend=mujoco",
        "env.tensor_runtime=x",
        "training.inference_slot_capacity=17",
        "training.replay_ingress_slot_rows=3",
    ],
)
def test_rejected_overrides_exit_2(override: str) -> None:
    result = _run(*CANONICAL, "--print-config", override)
    assert result.returncode == 2
    assert "configuration error" in result.stderr
    assert override.split("=")[0] in result.stderr


def test_mjwarp_without_cuda_exits_2_before_any_backend(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA; the CPU-host refusal does not apply")
    log_dir = tmp_path / "run"
    result = _run(*CANONICAL, f"log_dir={log_dir}")
    assert result.returncode == 2
    assert "requires Linux with a CUDA device" in result.stderr
    assert not log_dir.exists(), "nothing may be written before validation passes"


def test_bad_choice_exits_2() -> None:
    result = _run("--algo", "ppo", "--task", "g1_walk_flat", "--sim", "mujoco", "--print-config")
    assert result.returncode == 2


@pytest.mark.parametrize("override", ["algo.num_envs=lots", "training.no_play=1", "algo.gamma=[0.9]"])
def test_wrong_typed_override_exits_2_naming_the_field(override: str) -> None:
    result = _run(*CANONICAL, "--print-config", override)
    assert result.returncode == 2
    assert f"{override.split('=')[0]} must be" in result.stderr
