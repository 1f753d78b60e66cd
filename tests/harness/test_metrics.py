from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.metrics import MetricsError, Record, app, windows_from_records
from runtime.metrics_schema import SCHEMA_TAG, MetricsWriter

runner = CliRunner()


def _raw_events(path: Path, scalars: dict[str, float], step: int = 1) -> None:
    """An event file NOT written by MetricsWriter (historical or foreign producer)."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(path)) as w:
        for tag, value in scalars.items():
            w.add_scalar(tag, value, global_step=step)


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_last_windows_from_real_event_files(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path) as writer:
        for i in range(1, 26):
            writer.write(i * 128, {"episode/length_mean": float(i), "throughput/env_steps_per_s": 1000.0 + i})
        writer.write(26 * 128, {"loss/critic": float("nan")})
    code, out = _run(str(tmp_path), "--last", "20", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["metric_schema_version"] == 1 and data["legacy_unversioned"] is False
    assert data["window_count"] == 26 and len(data["windows"]) == 20
    assert [w["step"] for w in data["windows"]] == [i * 128 for i in range(7, 27)]
    assert data["windows"][0]["metrics"]["episode/length_mean"] == 7.0
    assert data["windows"][-1]["metrics"] == {"loss/critic": None}  # NaN is not JSON
    code, out = _run(str(tmp_path), "--last", "2")  # table mode
    assert code == 0 and "episode/length_mean" in out


def test_unversioned_requires_explicit_legacy_mode(tmp_path: Path) -> None:
    _raw_events(tmp_path, {"Episode/rew": 3.0})
    code, out = _run(str(tmp_path), "--json")
    assert code == 2 and "--legacy-unversioned" in out and SCHEMA_TAG in out
    code, out = _run(str(tmp_path), "--json", "--legacy-unversioned")
    assert code == 0, out
    data = json.loads(out)
    assert data["legacy_unversioned"] is True and data["metric_schema_version"] is None
    assert data["windows"][0]["metrics"] == {"Episode/rew": 3.0}


def test_future_schema_fails_even_in_legacy_mode(tmp_path: Path) -> None:
    _raw_events(tmp_path, {SCHEMA_TAG: 2.0, "loss/critic": 1.0}, step=0)
    for extra in ([], ["--legacy-unversioned"]):
        code, out = _run(str(tmp_path), "--json", *extra)
        assert code == 2 and "unsupported metric schema version 2" in out


def test_foreign_tag_in_v1_file_fails(tmp_path: Path) -> None:
    _raw_events(tmp_path, {SCHEMA_TAG: 1.0, "my/new_tag": 1.0}, step=0)
    code, out = _run(str(tmp_path), "--json")
    assert code == 2 and "my/new_tag" in out


def test_missing_dir_and_no_events(tmp_path: Path) -> None:
    code, out = _run(str(tmp_path / "nope"), "--json")
    assert code == 2 and "not a directory" in out
    code, out = _run(str(tmp_path), "--json")
    assert code == 2 and "no TensorBoard event files" in out
    code, out = _run(str(tmp_path), "--last", "0")
    assert code == 2


def test_windows_merge_later_record_wins() -> None:
    files = {
        "a": [Record(0.0, 0, SCHEMA_TAG, 1.0), Record(1.0, 10, "loss/critic", 1.0)],
        "b": [
            Record(0.5, 0, SCHEMA_TAG, 1.0),
            Record(2.0, 10, "loss/critic", 2.0),
            Record(2.0, 20, "q/mean", 3.0),
        ],
    }
    out = windows_from_records(files, last=5)
    assert [w["step"] for w in out["windows"]] == [10, 20]
    assert out["windows"][0]["metrics"] == {"loss/critic": 2.0}
    with pytest.raises(MetricsError, match="--last"):
        windows_from_records(files, last=0)
