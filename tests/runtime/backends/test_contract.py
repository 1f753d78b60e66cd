"""The SimBackend contract: every registered backend implements all of it, with the declared shapes, and
the diagnostics payload the probe and the trainer's manifest write is schema-valid whatever a backend does.

The mjwarp instance runs on Warp's CPU device (diagnostic lane); its first build compiles the MJWarp
kernels (cached afterwards), so that case is slow.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any, get_args

import mujoco
import pytest
import torch
from jsonschema import Draft202012Validator

from soakbench.foundation.schema import load_schema
from soakbench.runtime.assets import load_model
from soakbench.runtime.backends import BACKENDS, backend_class
from soakbench.runtime.backends.base import SimBackend
from soakbench.runtime.backends.contract import (
    DataPlane,
    HostSteppingInfo,
    OptimizationDiagnostic,
    PhysicsWarnings,
    TransferDeclaration,
    TransferDirection,
    WarningCount,
    diagnostics_payload,
)
from soakbench.runtime.manager.collector import backend_diagnostics_payload

CPU = torch.device("cpu")
N, DECIMATION = 2, 4
# every method the probe and the manifest call on a backend
CONTRACT_METHODS = (
    "step",
    "reset_rows",
    "public_state",
    "get_tensor_runtime_diagnostics",
    "transfer_inventory",
    "transfer_counters",
    "host_stepping_info",
    "physics_warnings",
    "close",
)
SLOW = {"mjwarp"}  # Warp kernel compile on first use


def _diagnostics_validator(schema_name: str) -> Draft202012Validator:
    schema = load_schema(schema_name)
    defs = schema["$defs"]
    if "backend_diagnostics" in defs:  # the probe schema
        return Draft202012Validator({"$defs": defs, "$ref": "#/$defs/backend_diagnostics"})
    node = schema["properties"]["backend_diagnostics"]  # the runtime manifest
    return Draft202012Validator({"$defs": defs, **node})


VALIDATORS = {
    name: _diagnostics_validator(name)
    for name in ("probe-0.3.0.schema.json", "runtime-manifest-1.schema.json")
}


def _assert_valid_payload(payload: Mapping[str, Any]) -> None:
    for name, validator in VALIDATORS.items():
        assert [e.message for e in validator.iter_errors(payload)] == [], name


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_registered_backend_declares_the_whole_contract(name: str) -> None:
    cls = backend_class(name)
    assert issubclass(cls, SimBackend) and not inspect.isabstract(cls)
    assert cls.backend_type == name and cls.data_plane in get_args(DataPlane)
    for method in CONTRACT_METHODS:
        assert callable(getattr(cls, method)), method
    inventory = cls.transfer_inventory()
    assert all(isinstance(item, TransferDeclaration) for item in inventory)
    assert all(item.direction in get_args(TransferDirection) for item in inventory)
    keys = [f"{item.direction}/{item.phase}" for item in inventory]
    assert len(set(keys)) == len(keys)
    if cls.data_plane == "host_bridge":  # the probe schema requires a host bridge to declare its copies
        assert inventory


@pytest.fixture(scope="module")
def g1() -> mujoco.MjModel:
    return load_model("robots/g1/scene_flat.xml")


@pytest.fixture(
    params=[pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in sorted(BACKENDS)]
)
def backend(request: pytest.FixtureRequest, g1: mujoco.MjModel) -> Iterator[SimBackend]:
    built = backend_class(request.param)(g1, N, CPU, DECIMATION)
    yield built
    built.close()


def _exercise(backend: SimBackend) -> None:
    ctrl = torch.tensor(backend.model.key("stand").ctrl, dtype=torch.float32).repeat(N, 1)
    backend.step(ctrl)
    state = backend.public_state()
    backend.reset_rows(torch.tensor([1]), state.qpos[1:].clone(), torch.zeros(1, backend.model.nv))
    backend.step(ctrl)


def test_every_backend_honours_the_declared_shapes(backend: SimBackend, g1: mujoco.MjModel) -> None:
    assert backend.model is g1 and backend.num_envs == N and backend.decimation == DECIMATION
    _exercise(backend)
    state = backend.public_state()
    assert state.qpos.shape == (N, g1.nq) and state.actuator_force.shape == (N, g1.nu)

    declared = {f"{item.direction}/{item.phase}" for item in backend.transfer_inventory()}
    counters = backend.transfer_counters()
    assert set(counters) <= declared | {"h2d/backend_init"}  # construction's one copy is not per step
    assert all(set(c) == {"count", "bytes"} and c["count"] > 0 for c in counters.values())
    if not declared:
        assert counters == {}  # nothing declared: nothing may be counted

    info = backend.host_stepping_info()
    if info is not None:
        assert set(info) == set(HostSteppingInfo.__annotations__) and info["num_threads"] >= 1
    warnings = backend.physics_warnings()
    if warnings is not None:
        assert set(warnings) == set(PhysicsWarnings.__annotations__)
        assert all(set(c) == set(WarningCount.__annotations__) for c in warnings["counts"].values())

    payload = diagnostics_payload(backend)
    assert payload["available"] is True and payload["backend_type"] == backend.backend_type
    _assert_valid_payload(payload)


class _Source:
    backend_type = "fake"

    def __init__(self, diagnostics: Any) -> None:
        self._diagnostics = diagnostics

    def get_tensor_runtime_diagnostics(self) -> dict[str, OptimizationDiagnostic]:
        if isinstance(self._diagnostics, Exception):
            raise self._diagnostics
        return dict(self._diagnostics)


def test_diagnostics_payload_normalizes_and_never_raises() -> None:
    loose: dict[str, Any] = {
        "on": {"requested": True, "enabled": True, "disable_reason": "stale"},
        "off": {"requested": 1, "enabled": False, "disable_reason": None},
    }
    payload = diagnostics_payload(_Source(loose))
    assert payload == {
        "available": True,
        "backend_type": "fake",
        "diagnostics": {
            "on": {"requested": True, "enabled": True, "disable_reason": None},
            "off": {"requested": True, "enabled": False, "disable_reason": "unspecified"},
        },
    }
    failing = diagnostics_payload(_Source(RuntimeError("device lost")))
    assert failing == {
        "available": False,
        "backend_type": "fake",
        "unavailable_reason": "get_tensor_runtime_diagnostics raised RuntimeError: device lost",
    }
    empty = diagnostics_payload(_Source({}))
    assert empty["available"] is False and "declares no" in empty["unavailable_reason"]
    for each in (payload, failing, empty):
        _assert_valid_payload(each)


def test_the_manifest_payload_of_an_env_without_a_backend_is_explicit() -> None:
    class NoBackend:
        pass

    payload = backend_diagnostics_payload(NoBackend(), "mujoco")
    assert payload["available"] is False and payload["backend_type"] == "mujoco"
    assert "AttributeError" in payload["unavailable_reason"]
    _assert_valid_payload(payload)
