"""The artifact's ``gpu_health`` section: schema-valid with GPUs and without NVML, strict about its shape,
re-derived by ``matrix ingest`` (an edited summary or a dropped row is named)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from soakbench.harness.soak.evidence.artifact import validation_errors
from soakbench.harness.soak.verdicts.gpu import assess_gpu
from soakbench.matrix.grading.rederive import disagreements
from tests.harness.soak.evidence.test_artifact import build
from tests.harness.soak.verdicts import _gpu_data as data

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _gpu_artifact() -> dict[str, Any]:
    devices = [
        data.device(0, start=0, end=2),
        data.device(1, start=data.NOT_SUPPORTED, end=data.NOT_SUPPORTED, registered=False),
    ]
    samples = [
        data.sample(1.0, data.reading(0), data.reading(1, ecc=data.NOT_SUPPORTED)),
        data.sample(
            2.0, data.reading(0, reasons=("HwThermal",), ecc=2), data.reading(1, mask=data.NOT_SUPPORTED)
        ),
    ]
    raw = data.raw(devices, events=[data.xid(79, 2.0)])
    return build(trainer_returncode=1, gpu_health=assess_gpu(raw, samples))


def test_an_artifact_with_gpu_health_validates_and_names_the_fault() -> None:
    artifact = _gpu_artifact()
    assert validation_errors(artifact) == []
    assert artifact["failure_classification"] == "gpu_fault"
    section = artifact["gpu_health"]
    assert section["ecc_uncorrected"]["0"]["increase"] == 2
    assert section["ecc_uncorrected"]["1"] == data.NOT_SUPPORTED
    assert section["throttle"]["samples_throttled"] == 1 and section["fails_on_throttle"] is False
    gpu = [c["result"] for c in artifact["criteria"] if c["name"].startswith("gpu_")]
    assert gpu == ["fail", "fail", "not_applicable"]


def test_the_schema_refuses_a_malformed_gpu_section() -> None:
    artifact = _gpu_artifact()
    for path, value in (
        (("devices", 0, "at_start", "temperature_c"), "hot"),
        (("devices", 1, "xid_events"), {"not_observable": ""}),
        (("devices", 0, "start", "pcie_replay_counter"), -1),
        (("xid_events", 0, "xid"), "79"),
        (("throttle", "share"), 1.5),
    ):
        broken = copy.deepcopy(artifact)
        node: Any = broken["gpu_health"]
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        assert validation_errors(broken), path
    extra = copy.deepcopy(artifact)
    extra["gpu_health"]["devices"][0]["power_w"] = 0
    assert any("power_w" in e for e in validation_errors(extra))


def test_matrix_ingest_rederives_the_gpu_section() -> None:
    artifact = json.loads((FIXTURES / "artifact_clean.json").read_text())
    samples = [json.loads(line) for line in (FIXTURES / "samples_clean.jsonl").read_text().splitlines()]
    assert disagreements(artifact, samples) == []
    edited = copy.deepcopy(artifact)
    edited["gpu_health"]["throttle"]["samples_judged"] = 5
    assert any(d.startswith("gpu_health.throttle (row gpu_throttle)") for d in disagreements(edited, samples))
    relabelled = copy.deepcopy(artifact)
    next(c for c in relabelled["criteria"] if c["name"] == "gpu_throttle")["result"] = "pass"
    assert "row gpu_throttle: recorded 'pass', re-derived 'not_applicable'" in " ".join(
        disagreements(relabelled, samples)
    )
    old = copy.deepcopy(artifact)  # written before the GPU section: re-derived without it
    del old["gpu_health"]
    old["criteria"] = [c for c in old["criteria"] if not c["name"].startswith("gpu_")]
    assert validation_errors(old) == [] and disagreements(old, samples) == []
