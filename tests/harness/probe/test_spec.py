"""The worker spec: what the launcher writes parses back; anything else is refused naming the field; the
worker's command line exits 2 on a bad spec and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.probe.spec import FIELDS, SpecError, WorkerSpec, parse_spec
from soakbench.harness.probe.worker import main
from soakbench.runtime.config import ConfigError

SPEC = WorkerSpec(
    backend="mujoco",
    algo="flashsac",
    task="g1_motion_tracking",
    overrides=("algo.num_envs=16", "seed=0"),
    warmup=2,
    iters=6,
    seed=0,
    torch_threads=1,
    rounds=5,
)


def _raw(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(json.dumps(SPEC.to_json()))
    raw.update(over)
    return raw


def test_the_launchers_spec_round_trips_through_json() -> None:
    assert parse_spec(json.loads(json.dumps(SPEC.to_json()))) == SPEC
    assert list(SPEC.to_json()) == list(FIELDS)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], r"JSON object .* got list"),
        ({k: v for k, v in _raw().items() if k != "iters"}, r"missing field\(s\) \['iters'\]"),
        (_raw(extra=1), r"unknown field\(s\) \['extra'\]"),
        (_raw(iters=0), r"'iters' must be an integer >= 1, got 0"),
        (_raw(iters=True), r"'iters' must be an integer >= 1, got True"),
        (_raw(iters=2.0), r"'iters' must be an integer >= 1, got 2.0"),
        (_raw(warmup=-1), r"'warmup' must be an integer >= 0"),
        (_raw(seed=2**31), r"'seed' must be an integer in 0\.\.2147483647"),
        (_raw(torch_threads="1"), r"'torch_threads' must be an integer >= 1"),
        (_raw(rounds=0), r"'rounds' must be an integer >= 1"),
        (_raw(step_sleep_ms=-0.5), r"'step_sleep_ms' must be a finite number >= 0"),
        (_raw(step_sleep_ms=True), r"'step_sleep_ms' must be a finite number >= 0"),
        (_raw(backend=""), r"'backend' must be a non-empty string"),
        (_raw(task=3), r"'task' must be a non-empty string"),
        (_raw(overrides="seed=0"), r"'overrides' must be a list of non-empty strings"),
        (_raw(overrides=["seed=0", 1]), r"'overrides' must be a list of non-empty strings"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(raw: object, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_spec(raw)


def _never(spec: WorkerSpec) -> dict[str, Any]:
    raise AssertionError("a bad spec must not be measured")


def test_worker_exits_2_on_a_bad_spec_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(_raw(iters=0)))
    assert main([str(spec_path), str(out)], runner=_never) == 2
    assert "'iters' must be an integer >= 1" in capsys.readouterr().err
    spec_path.write_text("{not json")
    assert main([str(spec_path), str(out)], runner=_never) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.json"), str(out)], runner=_never) == 2
    assert "cannot read the spec" in capsys.readouterr().err
    assert main([str(spec_path)], runner=_never) == 2
    assert "usage:" in capsys.readouterr().err
    assert not out.exists()


def test_worker_writes_the_result_or_the_error(tmp_path: Path) -> None:
    spec_path, out = tmp_path / "spec.json", tmp_path / "out.json"
    spec_path.write_text(json.dumps(SPEC.to_json()))

    assert main([str(spec_path), str(out)], runner=lambda spec: {"backend": spec.backend}) == 0
    assert json.loads(out.read_text()) == {"ok": True, "result": {"backend": "mujoco"}}

    def fails(spec: WorkerSpec) -> dict[str, Any]:
        raise RuntimeError("physics diverged")

    assert main([str(spec_path), str(out)], runner=fails) == 1
    error = json.loads(out.read_text())["error"]
    assert error["type"] == "RuntimeError" and error["message"] == "physics diverged"
    assert error["config_error"] is False and "physics diverged" in error["traceback"]

    def bad_config(spec: WorkerSpec) -> dict[str, Any]:
        raise ConfigError("algo.num_envs must be in 1..65536")

    assert main([str(spec_path), str(out)], runner=bad_config) == 1
    assert json.loads(out.read_text())["error"]["config_error"] is True  # the launcher exits 2 on it
