from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.harness.metrics import extract_metrics
from soakbench.runtime.metrics_schema import (
    METRIC_SCHEMA_VERSION,
    SCHEMA_TAG,
    TAGS,
    MetricsWriter,
    check_tags,
)


def test_writer_records_schema_version_and_windows(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path) as writer:
        writer.write(64, {"loss/critic": 1.5, "episode/length_mean": 20})
    result = extract_metrics(tmp_path, last=5)
    assert result["metric_schema_version"] == METRIC_SCHEMA_VERSION == 1
    assert result["windows"] == [
        {
            "step": 64,
            "wall_time": result["windows"][0]["wall_time"],
            "metrics": {"episode/length_mean": 20.0, "loss/critic": 1.5},
        }
    ]


def test_writer_fails_closed_before_writing(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="bogus/tag"):
            writer.write(1, {"loss/critic": 1.0, "bogus/tag": 2.0})
        with pytest.raises(ValueError, match=r"reserved|schema"):
            writer.write(1, {SCHEMA_TAG: 2.0})
        with pytest.raises(ValueError, match="step"):
            writer.write(-1, {"loss/critic": 1.0})
        with pytest.raises(ValueError, match="number"):
            writer.write(1, {"loss/critic": "x"})  # type: ignore[dict-item]
    assert extract_metrics(tmp_path)["window_count"] == 0  # nothing half-written


def test_tag_set_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    missing = [tag for tag in TAGS if f"`{tag}`" not in doc]
    assert not missing, f"tags missing from docs/metrics.md: {missing}"
    check_tags({t: 0.0 for t in TAGS if t != SCHEMA_TAG})


def test_schema_module_imports_no_torch() -> None:
    code = "import sys, runtime.metrics_schema, harness.metrics; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
