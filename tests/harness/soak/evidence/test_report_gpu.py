"""The report's GPU health section: the table per GPU, the XID sentence, the throttle share and one plot
per GPU with the throttle episodes marked; a host without NVML says why instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soakbench.harness.soak.evidence.report import build_page
from soakbench.harness.soak.evidence.report_gpu import gpu_view, shown
from soakbench.harness.soak.verdicts.gpu import assess_gpu
from tests.harness.soak.evidence.test_artifact import build
from tests.harness.soak.verdicts import _gpu_data as data


def _samples() -> list[dict[str, Any]]:
    def reasons(t: int) -> tuple[str, ...]:
        return ("SwThermal", "HwThermal") if 20 <= t < 35 else ()

    return [
        {
            **data.sample(
                float(t), data.reading(0, reasons=reasons(t)), data.reading(1, mask=data.NOT_SUPPORTED)
            ),
            "totals": {},
            "processes": [],
        }
        for t in range(50)
    ]


def _stage(tmp_path: Path, gpu_health: dict[str, Any] | None) -> tuple[dict[str, Any], Path]:
    samples = _samples()
    (tmp_path / "soak.samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    artifact = build(trainer_returncode=1, gpu_health=gpu_health and assess_gpu(gpu_health, samples))
    artifact["samples_path"] = str(tmp_path / "soak.samples.jsonl")
    path = tmp_path / "soak.json"
    path.write_text(json.dumps(artifact))
    return artifact, path


def test_the_gpu_section_shows_counters_events_throttling_and_a_plot_per_gpu(tmp_path: Path) -> None:
    raw = data.raw([data.device(0), data.device(1, start=data.NOT_SUPPORTED, end=data.NOT_SUPPORTED)])
    raw["xid_events"] = [data.xid(79, 40.0)]
    artifact, path = _stage(tmp_path, raw)
    html = build_page(artifact, path)
    assert 'id="gpu-devices"' in html and "NVIDIA H200 (GPU-1)" in html
    assert "critical XID 79 on GPU 0 (GPU-0) between t=39.5 s and t=40.0 s" in html
    assert "30.0 % of 50 samples with a thermal, power-brake or hardware-slowdown clock event" in html
    assert html.count('data-gpu="') == 2
    view = gpu_view(artifact, _samples())
    assert view is not None and "uncorrected not observable (Not Supported)" in view["rows"][1]["ecc"]
    assert shown({"mask": 0, "names": []}) == "none" and shown(None) == "—"


def test_without_nvml_the_section_says_why(tmp_path: Path) -> None:
    artifact, path = _stage(tmp_path, data.unavailable())
    html = build_page(artifact, path)
    assert 'id="gpu-unavailable"' in html and "Driver Not Loaded" in html
    assert 'data-gpu="' not in html
    (tmp_path / "old").mkdir()
    older, older_path = _stage(tmp_path / "old", None)
    assert 'id="gpu-health"' not in build_page(older, older_path)
