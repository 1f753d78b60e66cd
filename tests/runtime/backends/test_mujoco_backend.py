"""MujocoBackend: contract shapes, packed transfer counting, reset isolation, determinism, fail-closed."""

from __future__ import annotations

import mujoco
import pytest
import torch

from soakbench.runtime.backends import backend_class
from soakbench.runtime.backends.mujoco import MujocoBackend

CPU = torch.device("cpu")
N = 6
DECIMATION = 4


def _ctrl(model: mujoco.MjModel, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    return (torch.rand(N, model.nu, generator=g) * 2 - 1) * 0.5


def _run(backend: MujocoBackend, model: mujoco.MjModel, steps: range) -> list[torch.Tensor]:
    out = []
    for k in steps:
        state = backend.step(_ctrl(model, k))
        out.append(torch.cat([state.qpos, state.qvel, state.sensordata, state.actuator_force], 1).clone())
    return out


def test_registry_resolves_backend() -> None:
    assert backend_class("mujoco") is MujocoBackend


@pytest.mark.parametrize("engine", ["threads", "batch"])
def test_shapes_widths_and_transfer_counters(tiny_model: mujoco.MjModel, engine: str) -> None:
    backend = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2, engine=engine)
    try:
        widths = backend.layout.widths()
        assert widths == {"qpos": 11, "qvel": 10, "sensordata": tiny_model.nsensordata, "actuator_force": 4}
        steps = 5
        _run(backend, tiny_model, range(steps))
        state = backend.public_state()
        for name, width in widths.items():
            tensor = getattr(state, name)
            assert tensor.shape == (N, width) and tensor.dtype == torch.float32 and tensor.device == CPU
            assert torch.isfinite(tensor).all()
        counters = backend.transfer_counters()
        width = sum(widths.values())
        assert counters["d2h/physics_exchange"] == {"count": steps, "bytes": steps * N * 4 * 4}
        assert counters["h2d/physics_exchange"] == {"count": steps, "bytes": steps * N * width * 4}
        declared = {(i.phase, i.direction) for i in MujocoBackend.transfer_inventory()}
        for key in counters:
            direction, phase = key.split("/")
            assert phase == "backend_init" or (phase, direction) in declared
        # time advanced by exactly decimation substeps per control step: the free body fell
        assert float(state.qpos[0, 2]) < 0.45
    finally:
        backend.close()


def test_engines_and_thread_counts_are_bit_identical(tiny_model: mujoco.MjModel) -> None:
    runs = []
    for engine, threads in (("threads", 1), ("threads", 2), ("batch", 2)):
        backend = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=threads, engine=engine)
        runs.append(_run(backend, tiny_model, range(12)))
        backend.close()
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("engine", ["threads", "batch"])
def test_reset_rows_touches_only_those_rows(tiny_model: mujoco.MjModel, engine: str) -> None:
    ref = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2, engine=engine)
    dut = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2, engine=engine)
    try:
        assert all(
            torch.equal(a, b)
            for a, b in zip(_run(ref, tiny_model, range(8)), _run(dut, tiny_model, range(8)), strict=True)
        )
        rows = torch.tensor([4, 1], dtype=torch.int64)  # unsorted on purpose
        qpos = torch.tensor(tiny_model.qpos0, dtype=torch.float32).repeat(2, 1)
        qpos[:, 2] = torch.tensor([0.6, 0.5])
        qvel = torch.zeros(2, tiny_model.nv)
        qvel[:, 0] = torch.tensor([0.3, -0.2])
        before = dut.public_state().qpos.clone()
        state = dut.reset_rows(rows, qpos, qvel)
        assert torch.equal(state.qpos[rows], qpos)
        assert torch.equal(state.qvel[rows], qvel)
        keep = torch.tensor([0, 2, 3, 5])
        assert torch.equal(state.qpos[keep], before[keep])
        # sensors of reset rows are refreshed (torso_pos sensor equals the written base position)
        torso = tiny_model.sensor("torso_pos").adr[0]
        assert torch.allclose(state.sensordata[rows, torso : torso + 3], qpos[:, :3], atol=1e-6)
        ref_after = _run(ref, tiny_model, range(8, 20))
        dut_after = _run(dut, tiny_model, range(8, 20))
        for a, b in zip(ref_after, dut_after, strict=True):
            assert torch.equal(a[keep], b[keep])  # untouched rows continue bit-identically
            assert not torch.equal(a[rows], b[rows])
        counters = dut.transfer_counters()
        assert counters["d2h/backend_reset"]["count"] == 1
        assert counters["h2d/backend_reset"] == {
            "count": 1,
            "bytes": 2 * dut.layout.width * 4,
        }
    finally:
        ref.close()
        dut.close()


def test_reset_matches_fresh_world(tiny_model: mujoco.MjModel) -> None:
    """A reset row is indistinguishable from a world that started in that state (warm start cleared)."""
    a = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=1)
    b = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=1)
    try:
        _run(a, tiny_model, range(10))
        rows = torch.arange(N)
        qpos = torch.tensor(tiny_model.qpos0, dtype=torch.float64).repeat(N, 1)
        qvel = torch.zeros(N, tiny_model.nv, dtype=torch.float64)
        a.reset_rows(rows, qpos, qvel)
        b.reset_rows(rows, qpos, qvel)
        for x, y in zip(_run(a, tiny_model, range(5)), _run(b, tiny_model, range(5)), strict=True):
            assert torch.equal(x, y)
    finally:
        a.close()
        b.close()


def test_public_state_is_a_live_view(tiny_model: mujoco.MjModel) -> None:
    backend = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=1)
    try:
        first = backend.step(_ctrl(tiny_model, 0))
        kept = first.qpos.clone()
        second = backend.step(_ctrl(tiny_model, 1))
        assert first.qpos.data_ptr() == second.qpos.data_ptr()
        assert not torch.equal(kept, second.qpos)
    finally:
        backend.close()


def test_diagnostics_are_honest(tiny_model: mujoco.MjModel) -> None:
    one = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=1)
    two = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2)
    single_env = MujocoBackend(tiny_model, 1, CPU, DECIMATION, num_threads=2)
    try:
        d1 = one.get_tensor_runtime_diagnostics()["parallel_host_stepping"]
        assert d1["enabled"] is False and "num_threads" in (d1["disable_reason"] or "")
        d2 = two.get_tensor_runtime_diagnostics()["parallel_host_stepping"]
        assert d2 == {"requested": True, "enabled": True, "disable_reason": None}
        d3 = single_env.get_tensor_runtime_diagnostics()["parallel_host_stepping"]
        assert d3["enabled"] is False and "num_envs" in (d3["disable_reason"] or "")
        assert two.host_stepping_info()["num_threads"] == 2
    finally:
        for b in (one, two, single_env):
            b.close()


def test_bad_inputs_fail_closed(tiny_model: mujoco.MjModel) -> None:
    backend = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2)
    try:
        with pytest.raises(ValueError, match=r"ctrl must have shape \[6, 4\]"):
            backend.step(torch.zeros(N, 3))
        bad = torch.zeros(N, 4)
        bad[3, 1] = float("nan")
        with pytest.raises(ValueError, match=r"non-finite values in rows \[3\]"):
            backend.step(bad)
        q, v = torch.zeros(2, 11), torch.zeros(2, 10)
        with pytest.raises(ValueError, match="unique"):
            backend.reset_rows(torch.tensor([1, 1]), q, v)
        with pytest.raises(ValueError, match=r"\[0, 6\)"):
            backend.reset_rows(torch.tensor([1, 6]), q, v)
        with pytest.raises(ValueError, match=r"qvel must have shape \[2, 10\]"):
            backend.reset_rows(torch.tensor([1, 2]), q, torch.zeros(2, 9))
        with pytest.raises(ValueError, match="int64"):
            backend.reset_rows(torch.tensor([1, 2], dtype=torch.int32), q, v)
    finally:
        backend.close()
    with pytest.raises(RuntimeError, match="after close"):
        backend.step(torch.zeros(N, 4))
    with pytest.raises(ValueError, match="num_threads"):
        MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=0)
    with pytest.raises(ValueError, match="engine must be one of"):
        MujocoBackend(tiny_model, N, CPU, DECIMATION, engine="rollout")
    with pytest.raises(TypeError, match="MjModel"):
        MujocoBackend("model.xml", N, CPU, DECIMATION)


@pytest.mark.parametrize("engine", ["threads", "batch"])
def test_auto_reset_on_instability_is_counted_per_world(tiny_model: mujoco.MjModel, engine: str) -> None:
    backend = MujocoBackend(tiny_model, N, CPU, DECIMATION, num_threads=2, engine=engine)
    try:
        assert backend.physics_warnings()["auto_resets"] == 0
        qpos = torch.tensor(tiny_model.qpos0, dtype=torch.float64).unsqueeze(0)
        qvel = torch.full((1, tiny_model.nv), 1e12, dtype=torch.float64)  # blows up on the next step
        backend.reset_rows(torch.tensor([2]), qpos, qvel)
        state = backend.step(torch.zeros(N, tiny_model.nu))
        # MuJoCo reset world 2 by itself (finite state again); the count says so
        assert torch.isfinite(state.qvel).all()
        counts = backend.warning_counts()
        assert counts.shape == (N, 7) and counts[2].sum() >= 1 and counts[[0, 1, 3, 4, 5]].sum() == 0
        summary = backend.physics_warnings()
        assert summary["auto_reset_worlds"] == 1 and summary["auto_resets"] == int(counts[2].sum())
        assert set(summary["counts"]) >= {"badqpos", "badqvel", "badqacc"}
        # a task reset of that world does not erase its history (MuJoCo zeroes its own counters)
        before = backend.warning_counts()[2].copy()
        backend.reset_rows(torch.tensor([2]), qpos, torch.zeros(1, tiny_model.nv, dtype=torch.float64))
        assert (backend.warning_counts()[2] == before).all()
    finally:
        backend.close()
