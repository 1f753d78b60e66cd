"""Throughput drift (harness/soak/verdicts/drift.py): synthetic series in, verdict out; its pass-table row; one
real `soak monitor` of a stand-in trainer whose steps slow down."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from soakbench.harness.soak.evidence.artifact import validation_errors
from soakbench.harness.soak.verdicts.drift import classify_throughput, throughput_drift, throughput_series
from soakbench.harness.soak.verdicts.evaluation import MonitorObservation, evaluate
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.trends import LeakTrends
from soakbench.matrix.grading.rederive import disagreements
from tests.harness.soak._observations import split
from tests.harness.soak._soakrun import REPO, SoakOutcome, monitor_args

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _series(decline: float, noise: float, n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n samples 5 s apart at 20000 env steps/s falling linearly by ``decline``, Gaussian noise (share)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 5.0
    level = 20000.0 * (1.0 - decline * t / t[-1])
    return t, level * (1.0 + noise * rng.standard_normal(n))


def _samples(t: np.ndarray, rates: np.ndarray) -> list[dict[str, Any]]:
    return [
        {"t": float(ti), "progress": {"iteration": i, "env_steps_per_s": float(r)}}
        for i, (ti, r) in enumerate(zip(t, rates, strict=True))
    ]


def test_flat_noisy_throughput_is_stable() -> None:
    verdict, details = classify_throughput(*_series(0.0, 0.05))
    assert verdict == "stable"
    assert abs(details["relative_change_pct"]) < 5.0


def test_a_20_percent_decline_under_noise_is_declining() -> None:
    verdict, details = classify_throughput(*_series(0.20, 0.05))
    assert verdict == "declining"
    assert details["relative_change_pct"] == pytest.approx(-20.0, abs=3.0)
    assert details["p_value"] < 0.01 and details["slope_per_hour"] < 0.0


def test_a_significant_but_small_decline_is_stable() -> None:
    verdict, details = classify_throughput(*_series(0.05, 0.005))
    assert verdict == "stable"
    assert details["p_value"] < 0.01
    assert "<= -10 %" in details["reason"]


def test_a_rising_throughput_is_stable() -> None:
    assert classify_throughput(*_series(-0.3, 0.02))[0] == "stable"


def test_too_few_points_is_insufficient_data() -> None:
    verdict, details = classify_throughput(*_series(0.5, 0.0, n=5))
    assert verdict == "insufficient_data"
    assert "fewer than the 8 needed" in details["reason"]


def test_records_seen_by_several_samples_count_once() -> None:
    t, rates = _series(0.0, 0.0, n=10)
    samples = [s for s in _samples(t, rates) for _ in range(3)]
    times, values = throughput_series(samples, 0.0, 1e9)
    assert times.size == 10 and values.size == 10


def test_a_command_without_throughput_records_is_insufficient_data() -> None:
    samples = [{"t": float(i), "progress": {"schema": 1, "iteration": i}} for i in range(100)]
    record = throughput_drift(samples, 0.0)
    assert record["verdict"] == "insufficient_data"
    assert "0 progress records with env_steps_per_s" in record["reason"]
    assert record["slope_per_hour"] is None and record["p_value"] is None


def test_startup_that_never_ended_is_insufficient_data() -> None:
    record = throughput_drift(_samples(*_series(0.3, 0.0)), None)
    assert record["verdict"] == "insufficient_data"
    assert record["window"] == {"t_start": None, "t_end": None}


def test_the_window_is_the_leak_verdicts_window() -> None:
    t, rates = _series(0.0, 0.0, n=300)
    rates[:150] = 1e6  # start-up burst; the window is the later two thirds after start-up
    record = throughput_drift(_samples(t, rates), 0.0)
    assert record["verdict"] == "stable"
    assert record["window"]["t_start"] == pytest.approx(t[-1] * 0.95 / 3.0, rel=0.05)


def _observation(drift: dict[str, Any] | None, gate: bool) -> tuple[MonitorObservation, Gates]:
    return split(
        mode="monitor",
        monitor_failure=None,
        trainer_returncode=0,
        run_summary=None,
        residual_processes=[],
        orphaned_shm_segments=[],
        leak_verdicts=LeakTrends.of_verdicts({"rss": "bounded"}),
        duration_s=10.0,
        min_duration_s=0.0,
        observation={"min_trend_samples": 8, "classes": {"rss": {"status": "observed", "samples": 100}}},
        throughput_drift=drift,
        fail_on_throughput_drift=gate,
    )


DECLINING = throughput_drift(_samples(*_series(0.3, 0.02)), 0.0)


def _row(obs: MonitorObservation) -> dict[str, Any]:
    return next(c for c in evaluate(*obs).criteria_dicts() if c["name"] == "throughput_drift")


def test_a_decline_is_information_unless_asked() -> None:
    evaluation = evaluate(*_observation(DECLINING, gate=False))
    assert evaluation.status == "passed"
    assert _row(_observation(DECLINING, gate=False))["result"] == "not_applicable"


def test_a_decline_fails_the_gated_run_with_its_own_class() -> None:
    evaluation = evaluate(*_observation(DECLINING, gate=True))
    assert evaluation.status == "failed"
    assert evaluation.failure_classification == "throughput_drift"
    assert evaluation.failure_reason is not None
    assert evaluation.failure_reason.startswith(
        "criterion throughput_drift failed: throughput_drift is declining"
    )


def test_the_gate_fails_closed_without_a_verdict() -> None:
    no_data = throughput_drift([{"t": float(i), "progress": {"iteration": i}} for i in range(50)], 0.0)
    assert _row(_observation(no_data, gate=True))["result"] == "fail"
    assert _row(_observation(None, gate=True))["result"] == "fail"
    stable = throughput_drift(_samples(*_series(0.0, 0.02)), 0.0)
    assert _row(_observation(stable, gate=True))["result"] == "pass"


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def test_the_fixture_artifact_records_the_drift_and_re_derives() -> None:
    artifact = _fixture("artifact_clean.json")
    samples = [json.loads(line) for line in (FIXTURES / "samples_clean.jsonl").read_text().splitlines()]
    assert validation_errors(artifact) == []
    assert artifact["throughput_drift"]["verdict"] == "stable"
    assert disagreements(artifact, samples) == []
    tampered = copy.deepcopy(artifact)
    tampered["throughput_drift"]["verdict"] = "declining"
    assert any(d.startswith("throughput_drift.verdict") for d in disagreements(tampered, samples))
    old = copy.deepcopy(artifact)  # an artifact written before the drift verdict still re-derives
    del old["throughput_drift"]
    old["criteria"] = [c for c in old["criteria"] if c["name"] != "throughput_drift"]
    assert validation_errors(old) == [] and disagreements(old, samples) == []


def _soak(tmp: Path, slowdown: float, gate: bool) -> SoakOutcome:
    tmp.mkdir()
    argv, output = monitor_args(tmp, "slowing_trainer.py", "6", str(slowdown), interval=0.1)
    if gate:
        argv.insert(argv.index("--"), "--fail-on-throughput-drift")
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    return SoakOutcome(done.returncode, done.stdout, done.stderr, output)


@pytest.mark.soak
@pytest.mark.linux_only
def test_a_real_slowing_trainer_is_declining_and_fails_only_when_asked(tmp_path: Path) -> None:
    reported = _soak(tmp_path / "reported", 1.0, gate=False)
    assert reported.returncode == 0, reported.stderr
    assert reported.artifact["throughput_drift"]["verdict"] == "declining"
    assert reported.artifact["throughput_drift"]["relative_change_pct"] < -10.0
    assert reported.criterion("throughput_drift")["result"] == "not_applicable"
    assert "Throughput drift" in (tmp_path / "reported" / "soak.html").read_text()
    gated = _soak(tmp_path / "gated", 1.0, gate=True)
    assert gated.returncode == 1, gated.stderr
    assert gated.artifact["failure_classification"] == "throughput_drift"
    assert gated.criterion("throughput_drift")["result"] == "fail"
