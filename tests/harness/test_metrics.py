from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soakbench.harness.metrics import UNITS, MetricsError, Record, app, windows_from_records
from soakbench.runtime.metrics_schema import SCHEMA_TAG, TAGS, MetricsWriter

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


def _run_with_windows(log_dir: Path, count: int, offset: float = 0.0) -> None:
    """A real schema-v1 run: ``count`` windows written by the runtime's MetricsWriter."""
    with MetricsWriter(log_dir) as writer:
        for i in range(1, count + 1):
            writer.write(i * 64, {"episode/reward_mean": offset + i, "throughput/env_steps_per_s": 100.0 * i})


def test_a_directory_holding_two_runs_is_refused_naming_them(tmp_path: Path) -> None:
    _run_with_windows(tmp_path / "run_a", 5)
    _run_with_windows(tmp_path / "run_b", 7, offset=100.0)
    code, out = _run(str(tmp_path), "--last", "3", "--json")
    assert code == 2
    assert "holds the event files of 2 runs: run_a, run_b" in out and "--all-runs" in out
    code, out = _run(str(tmp_path), "--last", "3", "--json", "--all-runs")
    assert code == 0, out
    data = json.loads(out)
    assert [(r["run"], r["window_count"], len(r["windows"])) for r in data["runs"]] == [
        ("run_a", 5, 3),
        ("run_b", 7, 3),
    ]
    assert [w["step"] for w in data["runs"][1]["windows"]] == [320, 384, 448]
    assert data["runs"][1]["averages"][0] == {
        "tag": "episode/reward_mean", "unit": "return", "mean": 106.0, "values": 3, "non_finite": 0,
    }  # fmt: skip
    code, out = _run(str(tmp_path / "run_b"), "--last", "3", "--json")  # one run: as before
    assert code == 0 and json.loads(out)["window_count"] == 7
    code, out = _run(str(tmp_path), "--last", "2", "--all-runs")  # table mode, one table per run
    assert code == 0 and "run_a" in out and "run_b" in out and "mean, last 2" in out


def test_last_n_averages_are_named_rows_with_units_beside_the_windows(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path) as writer:
        writer.write(64, {"loss/critic": 9.0, "replay/occupancy": 1.0})
        writer.write(128, {"loss/critic": 2.0, "replay/occupancy": 1.0})
        writer.write(192, {"loss/critic": float("nan"), "replay/occupancy": 0.0})
        writer.write(256, {"loss/critic": 4.0, "learner/updates_per_s": 50.0})
    code, out = _run(str(tmp_path), "--last", "3", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["last"] == 3 and [w["step"] for w in data["windows"]] == [128, 192, 256]
    assert data["averages"] == [
        {"tag": "learner/updates_per_s", "unit": "updates/s", "mean": 50.0, "values": 1, "non_finite": 0},
        {"tag": "loss/critic", "unit": "loss", "mean": 3.0, "values": 2, "non_finite": 1},
        {"tag": "replay/occupancy", "unit": "slots", "mean": 0.5, "values": 2, "non_finite": 0},
    ]
    code, out = _run(str(tmp_path), "--last", "3")
    assert code == 0 and "updates/s" in out and "mean, last 3" in out


def test_mixed_stamped_and_unstamped_files_in_one_run_are_refused(tmp_path: Path) -> None:
    _run_with_windows(tmp_path, 2)
    _raw_events(tmp_path, {"Episode/rew": 3.0})
    code, out = _run(str(tmp_path), "--json", "--legacy-unversioned")
    assert code == 2 and "mixed schema-stamped" in out and "unstamped" in out


def test_every_schema_tag_has_a_unit() -> None:
    assert set(UNITS) == set(TAGS) - {SCHEMA_TAG}


def _strict_json(text: str) -> object:
    """The whole of ``text`` as one strict JSON document (NaN/Infinity are not JSON)."""

    def refuse(constant: str) -> object:
        raise ValueError(f"non-JSON constant {constant} on stdout")

    return json.loads(text, parse_constant=refuse)


def _real_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``extract-metrics`` as a user runs it, with every Python warning shown (they belong on stderr)."""
    env = {**os.environ, "PYTHONWARNINGS": "always", "COLUMNS": "80"}
    command = [sys.executable, "-m", "soakbench.harness.metrics", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_json_stdout_of_the_real_command_is_one_document_whatever_else_is_said(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path / "run_a") as writer:
        writer.write(64, {"loss/critic": float("nan"), "q/max": float("inf"), "episode/count": 2.0})
    events = next((tmp_path / "run_a").glob("events.out.tfevents.*"))
    events.write_bytes(events.read_bytes() + b"\x17torn tail of a record")  # a torn final record
    _raw_events(tmp_path / "legacy", {"Episode/rew": 3.0})
    for args in (
        [str(tmp_path / "run_a"), "--json"],
        [str(tmp_path / "legacy"), "--json", "--legacy-unversioned"],
        [str(tmp_path), "--json", "--all-runs", "--legacy-unversioned", "--last", "1"],
    ):
        result = _real_command(*args)
        assert result.returncode == 0, result.stderr
        assert isinstance(_strict_json(result.stdout), dict), args
    data = _strict_json(_real_command(str(tmp_path / "run_a"), "--json").stdout)
    assert isinstance(data, dict) and data["windows"][0]["metrics"]["q/max"] is None
    refused = _real_command(str(tmp_path), "--json")  # two runs, no --all-runs: said on stderr only
    assert refused.returncode == 2 and refused.stdout == ""
    assert "extract-metrics: error:" in refused.stderr and "2 runs" in refused.stderr
