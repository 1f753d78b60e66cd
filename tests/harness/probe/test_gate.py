"""What ``probe compare --fail-on-regression`` gates on, from data alone (no processes): a headline
measure (env control steps/s, efficiency) called ``slower`` fails it; a phase timing never does, though
its verdict stays in the report."""

from __future__ import annotations

import random
from typing import Any

import pytest

from soakbench.harness.probe.samples import PHASE_SAMPLE_KEYS
from soakbench.harness.probe.two_probes import GATE_MEASURES, compare_artifacts, gating_regressions

PROCESSES, ROUNDS, ITERS, NUM_ENVS, DECIMATION = 3, 5, 20, 32, 4


def _row(measure: str, verdict: str) -> dict[str, Any]:
    return {"backend": "mujoco", "measure": measure, "verdict": verdict}


@pytest.mark.parametrize("verdict", ["faster", "no_change", "inconclusive"])
def test_no_headline_slower_means_no_regression(verdict: str) -> None:
    rows = [_row(m, verdict) for m in GATE_MEASURES] + [_row(k, verdict) for k in PHASE_SAMPLE_KEYS]
    assert gating_regressions(rows) == []


def test_slower_phase_timings_alone_do_not_gate() -> None:
    rows = [_row(m, "inconclusive") for m in GATE_MEASURES] + [_row(k, "slower") for k in PHASE_SAMPLE_KEYS]
    assert gating_regressions(rows) == []


@pytest.mark.parametrize("measure", GATE_MEASURES)
def test_a_slower_headline_measure_gates(measure: str) -> None:
    rows = [_row(m, "slower" if m == measure else "no_change") for m in GATE_MEASURES]
    rows += [_row(k, "faster") for k in PHASE_SAMPLE_KEYS]
    assert [r["measure"] for r in gating_regressions(rows)] == [measure]


def _process(rng: random.Random, env_ms: float, phase_ms: dict[str, float]) -> dict[str, Any]:
    """One worker block with the raw samples ``measure_groups`` reads, each value within 1 % jitter."""

    def jitter(value: float) -> float:
        return value * rng.uniform(0.995, 1.005)

    rounds = [
        {
            "iteration_ms": [jitter(env_ms) for _ in range(ITERS // ROUNDS)],
            "physics_steps": 1000 * DECIMATION,
            "physics_s": jitter(0.1),
        }
        for _ in range(ROUNDS)
    ]
    samples = {key: [jitter(phase_ms.get(key, 1.0)) for _ in range(ITERS)] for key in PHASE_SAMPLE_KEYS}
    return {"num_envs": NUM_ENVS, "decimation": DECIMATION, "rounds": rounds, "phase_samples_ms": samples}


def _artifact(seed: int, env_ms: float, phase_ms: dict[str, float]) -> dict[str, Any]:
    """The fields ``compare_artifacts`` reads, with ``PROCESSES`` synthetic mujoco processes."""
    rng = random.Random(seed)
    processes = [_process(rng, env_ms, phase_ms) for _ in range(PROCESSES)]
    return {
        "settings": {"task": "g1_motion_tracking", "backends": ["mujoco"], "num_envs": NUM_ENVS},
        "context": {
            "source": {"commit": None, "dirty": False},
            "software": {},
            "host": {"cpu_model": "cpu", "cores": 2},
            "gpu": {"devices": []},
        },
        "contention": {"other_cpu_share": 0.1, "loadavg_start": None},
        "created_unix_s": 0.0,
        "backends": {"mujoco": {"processes": processes, "stability": {"unstable": False}}},
    }


def _compare(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return compare_artifacts(base, new, threshold=0.05, allow_cross_host=False)


def test_a_slower_phase_is_reported_but_does_not_set_regression() -> None:
    report = _compare(_artifact(1, 8.0, {}), _artifact(2, 8.0, {"update_state_ms": 2.0}))
    verdicts = {r["measure"]: r["verdict"] for r in report["measures"]}
    assert verdicts["update_state_ms"] == "slower"  # the phase verdict is kept in the report
    assert verdicts["env_control_steps_per_s"] == "no_change" == verdicts["efficiency"]
    assert report["regression"] is False


def test_a_slower_env_step_sets_regression() -> None:
    report = _compare(_artifact(1, 8.0, {}), _artifact(2, 12.0, {}))
    failing = {r["measure"] for r in gating_regressions(report["measures"])}
    assert failing == {"env_control_steps_per_s", "efficiency"}
    assert report["regression"] is True


def test_a_faster_env_step_is_no_regression() -> None:
    report = _compare(_artifact(1, 12.0, {"iteration_ms": 12.0}), _artifact(2, 8.0, {"iteration_ms": 8.0}))
    verdicts = {r["measure"]: r["verdict"] for r in report["measures"]}
    assert verdicts["env_control_steps_per_s"] == "faster" and verdicts["iteration_ms"] == "faster"
    assert report["regression"] is False
