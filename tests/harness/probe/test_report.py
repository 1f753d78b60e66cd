"""The pure report builder: recorded steps and backend facts in, the schema's per-backend block out."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from soakbench.foundation.schema import load_schema
from soakbench.harness.probe.artifact import SCHEMA_NAME
from soakbench.harness.probe.limit import LimitDescription
from soakbench.harness.probe.report import (
    BackendFacts,
    CpuSpan,
    CpuTimes,
    Measurement,
    StepRecord,
    ThroughputRound,
    backend_report,
)
from soakbench.harness.probe.spec import WorkerSpec
from soakbench.harness.probe.stats import PROBE_PHASES
from soakbench.runtime.backends.contract import TransferCount, TransferDeclaration

NUM_ENVS, DECIMATION = 8, 4
SPEC = WorkerSpec("mujoco", "flashsac", "g1_motion_tracking", ("algo.num_envs=8",), 1, 2, 0, 1, 2)
INVENTORY = (
    TransferDeclaration("physics_exchange", "d2h", 1, "ctrl"),
    TransferDeclaration("physics_exchange", "h2d", 1, "state"),
)
EXCHANGE: dict[str, TransferCount] = {
    "d2h/physics_exchange": {"count": 1, "bytes": 8},
    "h2d/physics_exchange": {"count": 1, "bytes": 16},
}


def _step(ms: float, phases: dict[str, list[float]] | None = None, episodes: int = 0) -> StepRecord:
    return StepRecord(iteration_ms=ms, phase_ms=phases or {}, transfers=EXCHANGE, episodes=episodes)


def _facts(**over: Any) -> BackendFacts:
    fields: dict[str, Any] = {
        "pid": 4242,
        "parent_pid": 4241,
        "owner": {"algo": "flashsac", "task": "g1_motion_tracking", "sim": "mujoco", "chain": ["mujoco"]},
        "device": "cpu",
        "data_plane": "host_bridge",
        "diagnostic_lane": False,
        "num_envs": NUM_ENVS,
        "obs_dim": 10,
        "action_dim": 3,
        "decimation": DECIMATION,
        "physics_threads": 2,
        "host_stepping": None,
        "setup_s": 1.5,
        "warmup_s": 0.25,
        "backend_diagnostics": {"available": False, "backend_type": "mujoco", "unavailable_reason": "test"},
        "physics_warnings": None,
        "inventory": INVENTORY,
        "torch": {"version": "2", "cuda": None, "device_name": None, "intra_op_threads": 1},
    }
    fields.update(over)
    return BackendFacts(**fields)


LIMIT = LimitDescription(method="mujoco.rollout", worlds=NUM_ENVS, threads=2, device="cpu", cuda_graph=False)
# phased: 2 iterations of 10 ms; physics_exchange 6 ms each, one reset in the second
PHASED = (
    _step(10.0, {"physics_exchange": [6.0], "update_state": [2.0]}),
    _step(10.0, {"physics_exchange": [6.0], "update_state": [1.0], "backend_reset": [0.5, 0.5]}, episodes=3),
)
# rounds: (limit 3200 physics steps in 1 s = 800 control steps/s; env 8 envs in 10 ms = 800/s) -> 1.0,
# then (limit 1600 steps in 1 s = 400 control/s; env 8 envs in 5 ms = 1600/s) -> 4.0
ROUNDS = (
    ThroughputRound(physics_steps=3200, physics_s=1.0, env_steps=(_step(10.0, episodes=1),)),
    ThroughputRound(physics_steps=1600, physics_s=1.0, env_steps=(_step(5.0),)),
)
COUNTERS: dict[str, TransferCount] = {
    "d2h/physics_exchange": {"count": 4, "bytes": 32},
    "h2d/physics_exchange": {"count": 4, "bytes": 64},
}
SPAN = CpuSpan(wall_ms=20.0, process_cpu_ms=30.0, thread_cpu_ms=15.0)
CPU = CpuTimes(phases={"physics_exchange": SPAN}, physics_limit_blocks=SPAN, throughput_env_blocks=SPAN)
MEASURED = Measurement(phased=PHASED, rounds=ROUNDS, limit=LIMIT, counters_total=COUNTERS, cpu=CPU)


def _backend_validator() -> Draft202012Validator:
    defs = load_schema(SCHEMA_NAME)["$defs"]
    return Draft202012Validator({"$defs": defs, "$ref": "#/$defs/backend"})


def test_report_is_a_schema_valid_backend_block() -> None:
    block = backend_report(SPEC, _facts(), MEASURED)
    block["launcher_observed_pid"] = 4242  # added by the launcher, which observed the process
    errors = [e.message for e in _backend_validator().iter_errors(block)]
    assert errors == []


def test_phases_count_one_value_per_iteration_and_the_sections_that_ran() -> None:
    phases = backend_report(SPEC, _facts(), MEASURED)["phases"]
    assert set(phases) == {f"{p}_ms" for p in PROBE_PHASES} | {"iteration_ms", "unattributed_ms"}
    assert phases["iteration_ms"]["count"] == 2 and phases["iteration_ms"]["total_ms"] == 20.0
    assert phases["physics_exchange_ms"]["invocations"] == 2
    assert phases["backend_reset_ms"] == pytest.approx(
        {"count": 2, "total_ms": 1.0, "mean_ms": 0.5, "median_ms": 0.5, "p95_ms": 1.0, "min_ms": 0.0,
         "max_ms": 1.0, "invocations": 2, "share_of_iteration": 0.05}
    )  # fmt: skip
    assert phases["reset_publication_ms"]["invocations"] == 0
    assert phases["unattributed_ms"]["total_ms"] == pytest.approx(20.0 - 12.0 - 3.0 - 1.0)


def test_throughput_limit_and_efficiency() -> None:
    block = backend_report(SPEC, _facts(), MEASURED)
    assert block["throughput_env_control_steps_per_s"] == pytest.approx(NUM_ENVS * 2 / 0.015)
    assert block["throughput_phased_env_control_steps_per_s"] == pytest.approx(NUM_ENVS * 2 / 0.020)
    assert block["throughput_iteration_ms"]["count"] == 2
    limit = block["physics_limit"]
    assert limit == {**LIMIT, "physics_steps": 4800, "elapsed_s": 2.0, "physics_steps_per_s": 2400.0,
                     "control_steps_per_s": 600.0}  # fmt: skip
    assert [r["efficiency"] for r in block["rounds"]] == pytest.approx([1.0, 4.0])
    assert block["efficiency"] == pytest.approx(statistics.median([1.0, 4.0]))
    assert block["episodes_finished"] == 4  # both loops


def test_transfers_cover_every_measured_step() -> None:
    transfers = backend_report(SPEC, _facts(), MEASURED)["transfers"]
    assert transfers["control_steps"] == 4 and transfers["within_inventory"] is True
    assert transfers["inventory_declared"] is True and transfers["counters_total"] == COUNTERS
    assert [e["measured_total_count"] for e in transfers["inventory"]] == [4, 4]
    assert transfers["inventory"][0]["description"] == "ctrl"


def test_a_device_plane_backend_declares_nothing_and_must_count_nothing() -> None:
    facts = _facts(data_plane="device", inventory=(), physics_threads=None)
    quiet = Measurement(
        phased=tuple(StepRecord(s.iteration_ms, s.phase_ms, {}, s.episodes) for s in PHASED),
        rounds=tuple(
            ThroughputRound(
                r.physics_steps, r.physics_s, tuple(StepRecord(1.0, {}, {}, 0) for _ in r.env_steps)
            )
            for r in ROUNDS
        ),
        limit=LIMIT,
        counters_total={},
        cpu=CPU,
    )
    transfers = backend_report(SPEC, facts, quiet)["transfers"]
    assert transfers["inventory_declared"] is False and transfers["inventory"] == []
    assert transfers["within_inventory"] is True
    copying = backend_report(SPEC, facts, MEASURED)["transfers"]  # copies nobody declared
    assert copying["within_inventory"] is False
    assert copying["undeclared"] == ["d2h/physics_exchange", "h2d/physics_exchange"]


def test_an_unknown_phase_is_an_error_not_dropped() -> None:
    odd = Measurement((_step(1.0, {"teleport": [0.1]}),), ROUNDS, LIMIT, COUNTERS, CPU)
    with pytest.raises(ValueError, match="teleport"):
        backend_report(SPEC, _facts(), odd)
