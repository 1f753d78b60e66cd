"""MjwarpBackend on the CPU diagnostic device: parity with MuJoCo on G1, reset isolation, diagnostics.

The first Warp compile of the MJWarp kernels takes ~20-60 s (cached in ~/.cache/warp/<version>), so
the module shares its backends through module-scoped fixtures and every G1 test is marked slow.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import mujoco
import pytest
import torch

from soakbench.runtime.assets import load_model
from soakbench.runtime.backends import backend_class
from soakbench.runtime.backends.mjwarp import MjwarpBackend, MjwarpUnavailableError, import_warp
from soakbench.runtime.backends.mujoco import MujocoBackend

# one worker runs the module, so its module-scoped real MJWarp compile is made once, not once per worker
pytestmark = pytest.mark.xdist_group("mjwarp-backend")

CPU = torch.device("cpu")
N = 4
DECIMATION = 4
PARITY_STEPS = 50  # control steps = 200 substeps = 1.0 s of G1 standing under PD hold + noise
# max |mjwarp - mujoco| (float32 vs float64); measured maxima over these 50 steps are >=10x below
PARITY_ATOL = {"qpos": 1e-4, "qvel": 2e-3, "sensordata": 2e-3, "actuator_force": 2e-2}
FIELDS = ("qpos", "qvel", "sensordata", "actuator_force")


@pytest.fixture(scope="module")
def g1() -> mujoco.MjModel:
    return load_model("robots/g1/scene_flat.xml")


@pytest.fixture(scope="module")
def warp_pair(g1: mujoco.MjModel) -> Iterator[tuple[MjwarpBackend, MjwarpBackend]]:
    """Two CPU-device MJWarp backends (reference and device-under-test); compiled once."""
    ref = MjwarpBackend(g1, N, CPU, DECIMATION)
    dut = MjwarpBackend(g1, N, CPU, DECIMATION)
    yield ref, dut
    ref.close()
    dut.close()


def _stand(g1: mujoco.MjModel) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key = g1.key("stand")
    qpos = torch.tensor(key.qpos, dtype=torch.float64).repeat(N, 1)
    qpos[:, 0] += torch.arange(N, dtype=torch.float64)  # distinct worlds, same physics
    ctrl0 = torch.tensor(key.ctrl, dtype=torch.float32)
    return qpos, torch.zeros(N, g1.nv, dtype=torch.float64), ctrl0


def _ctrl(ctrl0: torch.Tensor, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(k)
    return ctrl0 + 0.1 * (torch.rand(N, ctrl0.numel(), generator=g) * 2 - 1)


def _cat(state: Any) -> torch.Tensor:
    return torch.cat([getattr(state, f) for f in FIELDS], 1).clone()


def test_registry_and_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert backend_class("mjwarp") is MjwarpBackend
    real_import = builtins.__import__

    def no_warp(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in ("warp", "mujoco_warp"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_warp)
    with pytest.raises(MjwarpUnavailableError, match=r"uv sync --extra mjwarp"):
        import_warp()


def test_refuses_unsupported_device(g1: mujoco.MjModel) -> None:
    with pytest.raises(ValueError, match="cuda or cpu"):
        MjwarpBackend(g1, N, torch.device("meta"), DECIMATION)


@pytest.mark.slow
def test_cpu_lane_diagnostics_and_no_transfers(warp_pair: tuple[MjwarpBackend, MjwarpBackend]) -> None:
    backend, _ = warp_pair
    diag = backend.get_tensor_runtime_diagnostics()
    assert diag["cuda_graph"]["requested"] is True and diag["cuda_graph"]["enabled"] is False
    assert "cpu" in (diag["cuda_graph"]["disable_reason"] or "")
    assert diag["selected_reset_sensor_refresh"] == {
        "requested": True,
        "enabled": True,
        "disable_reason": None,
    }
    rand = diag["device_reset_randomization"]
    assert rand["enabled"] is False and "no reset randomization" in (rand["disable_reason"] or "")
    assert backend.data_plane == "device" and backend.transfer_counters() == {}
    assert backend.layout.widths() == {
        "qpos": 36,
        "qvel": 35,
        "sensordata": 192,
        "actuator_force": 29,
    }


@pytest.mark.slow
def test_parity_with_mujoco_on_g1(g1: mujoco.MjModel, warp_pair: tuple[MjwarpBackend, MjwarpBackend]) -> None:
    warp, _ = warp_pair
    cpu = MujocoBackend(g1, N, CPU, DECIMATION, num_threads=1)
    try:
        qpos, qvel, ctrl0 = _stand(g1)
        rows = torch.arange(N)
        a, b = cpu.reset_rows(rows, qpos, qvel), warp.reset_rows(rows, qpos, qvel)
        for k in range(PARITY_STEPS):
            a, b = cpu.step(_ctrl(ctrl0, k)), warp.step(_ctrl(ctrl0, k))
            for field in FIELDS:
                err = float((getattr(b, field) - getattr(a, field)).abs().max())
                assert err <= PARITY_ATOL[field], f"{field} differs by {err:.3g} at control step {k + 1}"
        assert float(a.qpos[:, 2].min()) > 0.6  # still standing: the comparison covered contact physics
    finally:
        cpu.close()


@pytest.mark.slow
def test_reset_rows_isolation(g1: mujoco.MjModel, warp_pair: tuple[MjwarpBackend, MjwarpBackend]) -> None:
    ref, dut = warp_pair
    qpos, qvel, ctrl0 = _stand(g1)
    rows = torch.arange(N)
    ref.reset_rows(rows, qpos, qvel)
    dut.reset_rows(rows, qpos, qvel)
    for k in range(5):
        assert torch.equal(_cat(ref.step(_ctrl(ctrl0, k))), _cat(dut.step(_ctrl(ctrl0, k))))
    reset = torch.tensor([2, 0])
    keep = torch.tensor([1, 3])
    new_qpos = qpos[reset].clone()
    new_qpos[:, 2] += 0.05
    new_qvel = torch.zeros(2, g1.nv, dtype=torch.float64)
    new_qvel[:, 0] = 0.2
    before = _cat(dut.public_state())
    state = dut.reset_rows(reset, new_qpos, new_qvel)
    assert torch.equal(state.qpos[reset], new_qpos.float())
    assert torch.equal(_cat(state)[keep], before[keep])  # published rows untouched
    # sensors of the reset rows are refreshed at the new state (pelvis_pos framepos == base position)
    adr = g1.sensor("pelvis_pos").adr[0]
    torch.testing.assert_close(
        state.sensordata[reset, adr : adr + 3], new_qpos[:, :3].float(), atol=1e-4, rtol=0
    )
    for k in range(5, 15):
        a, b = _cat(ref.step(_ctrl(ctrl0, k))), _cat(dut.step(_ctrl(ctrl0, k)))
        assert torch.equal(a[keep], b[keep])  # untouched worlds continue bit-identically
        assert not torch.equal(a[reset], b[reset])


@pytest.mark.slow
def test_bad_inputs_fail_closed(warp_pair: tuple[MjwarpBackend, MjwarpBackend]) -> None:
    backend, _ = warp_pair
    with pytest.raises(ValueError, match=r"ctrl must have shape \[4, 29\]"):
        backend.step(torch.zeros(N, 28))
    with pytest.raises(ValueError, match=r"qpos must have shape \[1, 36\]"):
        backend.reset_rows(torch.tensor([0]), torch.zeros(1, 35), torch.zeros(1, 35))
