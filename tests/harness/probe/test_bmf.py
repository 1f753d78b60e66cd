"""Bencher Metric Format documents of a probe and of a comparison, from data (no processes): the names,
the figures and their intervals come from the artifact and the report, never made up."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from soakbench.foundation.schema import validation_errors
from soakbench.harness.probe.bmf import (
    BMF_SCHEMA,
    BmfPathError,
    benchmark_name,
    bmf_output,
    compare_bmf,
    probe_bmf,
    write_bmf,
)
from soakbench.harness.probe.samples import backend_summary, measure_groups
from soakbench.harness.probe.two_probes import compare_artifacts
from soakbench.harness.two_runs.stats import median_interval
from tests.harness.probe.test_gate import _artifact, _process


def _probe_artifact(seed: int, env_ms: float, backends: tuple[str, ...] = ("mujoco",)) -> dict[str, Any]:
    doc = _artifact(seed, env_ms, {})
    rng = random.Random(seed)
    doc["settings"].update(backends=list(backends), mjwarp_device="cpu")
    doc["backends"] = {}
    for backend in backends:
        processes = [_process(rng, env_ms, {}) for _ in range(3)]
        doc["backends"][backend] = {
            "processes": processes,
            "summary": backend_summary(processes),
            "stability": {"unstable": False},
        }
    return doc


def test_benchmark_names_are_stable_and_name_the_lane() -> None:
    settings = {"task": "g1_walk_flat", "num_envs": 256, "mjwarp_device": "cuda"}
    assert benchmark_name(settings, "mujoco") == "probe/g1_walk_flat/mujoco/256envs"
    assert benchmark_name(settings, "mjwarp") == "probe/g1_walk_flat/mjwarp/256envs"
    assert (
        benchmark_name({**settings, "mjwarp_device": "cpu"}, "mjwarp")
        == "probe/g1_walk_flat/mjwarp-cpu/256envs"
    )


def test_a_probe_gives_its_medians_with_their_bootstrap_intervals() -> None:
    artifact = _probe_artifact(1, 8.0, ("mjwarp", "mujoco"))
    document = probe_bmf(artifact)
    assert validation_errors(document, BMF_SCHEMA) == []
    assert set(document) == {
        "probe/g1_motion_tracking/mjwarp-cpu/32envs",
        "probe/g1_motion_tracking/mujoco/32envs",
    }
    entry = artifact["backends"]["mujoco"]
    metrics = document["probe/g1_motion_tracking/mujoco/32envs"]
    assert set(metrics) == {"env_steps_per_s", "efficiency"}
    for slug, measure in (("env_steps_per_s", "env_control_steps_per_s"), ("efficiency", "efficiency")):
        _, low, high = median_interval(measure_groups(entry["processes"], measure))
        assert metrics[slug] == {
            "value": entry["summary"][measure]["median"],
            "lower_value": low,
            "upper_value": high,
        }
        assert low <= metrics[slug]["value"] <= high


def test_a_figure_without_raw_samples_has_no_bounds() -> None:
    artifact = _probe_artifact(1, 8.0)
    del artifact["backends"]["mujoco"]["processes"]  # a summary alone gives no interval
    metrics = probe_bmf(artifact)["probe/g1_motion_tracking/mujoco/32envs"]
    assert all(set(m) == {"value"} for m in metrics.values())
    assert validation_errors(probe_bmf(artifact), BMF_SCHEMA) == []


def test_a_comparison_adds_the_ratios_with_the_report_intervals() -> None:
    base, new = _probe_artifact(1, 8.0), _probe_artifact(2, 12.0)
    report = compare_artifacts(base, new, threshold=0.05, allow_cross_host=False)
    document = compare_bmf(report, new)
    assert validation_errors(document, BMF_SCHEMA) == []
    metrics = document["probe/g1_motion_tracking/mujoco/32envs"]
    assert set(metrics) == {"env_steps_per_s", "efficiency", "env_steps_per_s_ratio", "efficiency_ratio"}
    assert (
        metrics["env_steps_per_s"]
        == probe_bmf(new)["probe/g1_motion_tracking/mujoco/32envs"]["env_steps_per_s"]
    )
    row = next(r for r in report["measures"] if r["measure"] == "env_control_steps_per_s")
    assert metrics["env_steps_per_s_ratio"] == {
        "value": row["ratio"],
        "lower_value": row["ci_low"],
        "upper_value": row["ci_high"],
    }
    assert metrics["env_steps_per_s_ratio"]["upper_value"] < 1  # 12 ms steps against 8 ms


@pytest.mark.parametrize("value", ["relative.json", "/abs/missing-dir/x.json", "/tmp", "/tmp/x.txt"])
def test_a_bad_bmf_path_is_refused_naming_the_flag(value: str) -> None:
    with pytest.raises(BmfPathError, match="--bmf"):
        bmf_output(value)


def test_an_invalid_document_is_not_written(tmp_path: Path) -> None:
    out = tmp_path / "bmf.json"
    with pytest.raises(ValueError, match="value"):
        write_bmf(out, {"probe/x": {"env_steps_per_s": {"lower_value": 1.0}}})
    assert not out.exists()
    assert bmf_output(str(out)) == out and bmf_output(None) is None
