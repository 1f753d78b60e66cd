"""MjwarpBackend on CUDA: graph capture, device residency, no host transfers while stepping."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from soakbench.runtime.assets import load_model
from soakbench.runtime.backends.mjwarp import MjwarpBackend

pytestmark = pytest.mark.cuda
N = 64
DECIMATION = 4


@pytest.fixture(scope="module")
def backend() -> Iterator[MjwarpBackend]:
    b = MjwarpBackend(load_model("robots/g1/scene_flat.xml"), N, torch.device("cuda"), DECIMATION)
    yield b
    b.close()


def _ctrl(backend: MjwarpBackend) -> torch.Tensor:
    return torch.zeros(N, backend.layout.nu, device="cuda")


def test_graph_capture_enabled(backend: MjwarpBackend) -> None:
    diag = backend.get_tensor_runtime_diagnostics()["cuda_graph"]
    assert diag == {"requested": True, "enabled": True, "disable_reason": None}


def test_device_residency_and_zero_copy(backend: MjwarpBackend) -> None:
    state = backend.step(_ctrl(backend))
    for name in ("qpos", "qvel", "sensordata", "actuator_force"):
        tensor = getattr(state, name)
        assert tensor.is_cuda and tensor.dtype == torch.float32
    assert state.qpos.data_ptr() == backend._d.qpos.ptr  # a view of the Warp array, not a copy
    assert backend.step(_ctrl(backend)).qpos.data_ptr() == state.qpos.data_ptr()
    assert backend.transfer_counters() == {}


def test_no_host_transfers_in_stepping_loop(backend: MjwarpBackend) -> None:
    from torch.profiler import ProfilerActivity, profile

    ctrl = _ctrl(backend)
    rows = torch.tensor([1, 5], device="cuda")
    qpos = backend.public_state().qpos[rows].clone()
    qvel = torch.zeros(2, backend.layout.nv, device="cuda")
    backend.step(ctrl)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            backend.step(ctrl)
        backend.reset_rows(rows, qpos, qvel)
        torch.cuda.synchronize()
    names = [evt.name for evt in prof.events()]
    host_copies = [n for n in names if "HtoD" in n or "DtoH" in n]
    assert host_copies == [], host_copies
    assert any(names), "the profiler saw no CUDA activity at all: the check would be vacuous"
