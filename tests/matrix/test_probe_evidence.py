"""A filed probe counts only when its samples were stable: the instability flag is recomputed from the
raw rounds, so an honestly unstable probe is refused as evidence and a relabelled one is a problem."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from soakbench.harness.probe.samples import backend_entry, round_rates
from soakbench.matrix.grading.evidence import normalize_artifact

# A real, stable probe as `probe` wrote it (g1_walk_flat, 256 envs, 3 processes), kept apart from the
# filed evidence so that pruning never takes it away.
REAL_PROBE = Path(__file__).parent / "fixtures" / "probe-linux-cpu-walk-0.4.0.json"


def _filed() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(REAL_PROBE.read_text())
    return doc


def _facts(doc: dict[str, Any]) -> Any:
    entry = {
        "id": "probe-x",
        "kind": "probe",
        "file": "matrix/evidence/probe/probe-x.json",
        "platform": "linux-cpu",
    }
    return normalize_artifact(entry, doc)


def _slow_down(process: dict[str, Any], factor: float) -> None:
    """Every env block of ``process`` ``factor`` times slower, with every stated figure recomputed."""
    for raw in process["rounds"]:
        raw["iteration_ms"] = [ms * factor for ms in raw["iteration_ms"]]
        raw.update(round_rates(process["num_envs"], process["decimation"], raw))
    process["efficiency"] = statistics.median(raw["efficiency"] for raw in process["rounds"])
    env_ms = [ms for raw in process["rounds"] for ms in raw["iteration_ms"]]
    process["throughput_env_control_steps_per_s"] = (
        process["num_envs"] * len(env_ms) / (math.fsum(env_ms) / 1e3)
    )


def test_the_filed_stable_probe_counts() -> None:
    facts = _facts(_filed())
    assert facts.problems == () and facts.passed, facts.status_detail


def test_an_honestly_unstable_probe_does_not_count_and_says_why() -> None:
    doc = _filed()
    backend = doc["backends"]["mujoco"]
    _slow_down(backend["processes"][0], 2.0)
    doc["backends"]["mujoco"] = backend_entry(backend["processes"])
    assert doc["backends"]["mujoco"]["stability"]["unstable"] is True
    facts = _facts(doc)
    assert facts.problems == ()  # every figure agrees with the raw samples: not tampered, just noisy
    assert not facts.passed
    assert "mujoco: unstable (" in facts.status_detail
    assert "varies" in facts.status_detail and "between processes (bound 10%)" in facts.status_detail
    assert "quieter host" in facts.status_detail


def test_an_unstable_probe_relabelled_stable_is_a_problem() -> None:
    doc = _filed()
    backend = doc["backends"]["mujoco"]
    _slow_down(backend["processes"][0], 2.0)
    doc["backends"]["mujoco"] = {**backend_entry(backend["processes"]), "stability": backend["stability"]}
    facts = _facts(doc)
    assert any(p.startswith("backends.mujoco.stability") for p in facts.problems), facts.problems
