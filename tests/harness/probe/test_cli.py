"""The probe end to end on CPU: a real small run (schema, phase accounting, isolation) and every refusal."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soakbench.foundation.nvml import gpu_snapshot
from soakbench.foundation.schema import validation_errors
from soakbench.harness.probe.artifact import validate_artifact
from soakbench.harness.probe.bmf import BMF_SCHEMA
from soakbench.harness.probe.cli import ProbeInputError, check_preconditions, validate_settings
from soakbench.harness.probe.stats import PROBE_PHASES
from soakbench.runtime.config import PlatformFacts
from tests.harness import fake_nvml as fake

# one worker runs the module, so its module-scoped real probe is made once, not once per worker
pytestmark = pytest.mark.xdist_group("probe-cli")

REPO = Path(__file__).resolve().parents[3]
TASK = "g1_motion_tracking"


def _probe(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "soakbench.harness.probe", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def mujoco_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one real small probe: ``mujoco.json`` and its BMF document ``mujoco.bmf.json``."""
    folder = tmp_path_factory.mktemp("probe")
    done = _probe(
        "--backends", "mujoco", "--num-envs", "16", "--warmup", "2", "--iters", "6", "--task", TASK,
        "--processes", "2", "--output", str(folder / "mujoco.json"), "--bmf", str(folder / "mujoco.bmf.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the tables and messages go to stderr
    return folder


@pytest.fixture(scope="module")
def mujoco_artifact(mujoco_run: Path) -> dict[str, Any]:
    artifact: dict[str, Any] = json.loads((mujoco_run / "mujoco.json").read_text())
    return artifact


def test_real_probe_bmf_validates_and_restates_the_artifact(
    mujoco_run: Path, mujoco_artifact: dict[str, Any]
) -> None:
    document = json.loads((mujoco_run / "mujoco.bmf.json").read_text())
    assert validation_errors(document, BMF_SCHEMA) == []
    assert list(document) == [f"probe/{TASK}/mujoco/16envs"]
    metrics = document[f"probe/{TASK}/mujoco/16envs"]
    summary = mujoco_artifact["backends"]["mujoco"]["summary"]
    assert metrics["env_steps_per_s"]["value"] == summary["env_control_steps_per_s"]["median"]
    assert metrics["efficiency"]["value"] == summary["efficiency"]["median"]
    for metric in metrics.values():
        assert metric["lower_value"] <= metric["upper_value"]


def test_cli_bad_bmf_exits_2_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    for bad in ("rel.json", str(tmp_path / "missing" / "b.json"), str(tmp_path / "b.txt")):
        done = _probe("--backends", "mujoco", "--num-envs", "4", "--output", str(out), "--bmf", bad)
        assert done.returncode == 2 and "--bmf" in done.stderr and "measuring" not in done.stderr
    assert not list(tmp_path.iterdir())


def test_real_artifact_is_schema_valid(mujoco_artifact: dict[str, Any]) -> None:
    validate_artifact(mujoco_artifact)
    assert mujoco_artifact["schema_version"] == "0.4.0"
    names = {e["name"] for e in mujoco_artifact["exclusions"]}
    assert {"inference_ipc", "replay_ingestion", "learner_updates"} <= names
    assert mujoco_artifact["context"]["source"]["worktree_digest"].startswith("sha256:")


def test_schema_rejects_a_broken_artifact(mujoco_artifact: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(mujoco_artifact))
    del broken["backends"]["mujoco"]["processes"][0]["phases"]["iteration_ms"]
    with pytest.raises(ValueError, match="iteration_ms"):
        validate_artifact(broken)
    broken = json.loads(json.dumps(mujoco_artifact))
    broken["backends"]["mujoco"]["processes"][0]["transfers"][
        "inventory"
    ] = []  # host bridge must declare its copies
    with pytest.raises(ValueError):
        validate_artifact(broken)


def test_phase_accounting(mujoco_artifact: dict[str, Any]) -> None:
    result = mujoco_artifact["backends"]["mujoco"]["processes"][0]
    phases = result["phases"]
    iteration = phases["iteration_ms"]
    assert iteration["count"] == 6 == result["measured_iterations"]
    for name in PROBE_PHASES:
        block = phases[f"{name}_ms"]
        assert block["count"] == 6  # one per-iteration value per phase, 0 when the phase did not run
        assert 0 <= block["invocations"] <= 6
        assert block["total_ms"] <= iteration["total_ms"]
        assert block["max_ms"] <= iteration["max_ms"]
    # the physics exchange and state update run every step
    assert phases["physics_exchange_ms"]["invocations"] == 6
    assert phases["update_state_ms"]["invocations"] == 6
    # every phase lies inside its iteration's synchronized window: the residual is never negative
    assert phases["unattributed_ms"]["min_ms"] >= 0.0
    assert result["throughput_iteration_ms"]["count"] == 6


def test_host_bridge_reports_inventory_limit_and_efficiency(mujoco_artifact: dict[str, Any]) -> None:
    result = mujoco_artifact["backends"]["mujoco"]["processes"][0]
    transfers = result["transfers"]
    assert transfers["inventory_declared"] is True and transfers["control_steps"] == 12
    exchange = {(e["direction"], e["phase"]): e for e in transfers["inventory"]}
    assert exchange[("h2d", "physics_exchange")]["measured_total_count"] == 12
    assert exchange[("d2h", "physics_exchange")]["measured_total_count"] == 12
    assert transfers["within_inventory"] is True
    limit = result["physics_limit"]
    assert limit["method"] == "mujoco.rollout" and limit["worlds"] == 16
    assert limit["threads"] == result["physics_threads"]
    assert limit["control_steps_per_s"] == pytest.approx(limit["physics_steps_per_s"] / result["decimation"])
    # interleaved rounds (min(--rounds 5, --iters 6) = 5): each ratio is its env block over its limit block
    rounds = result["rounds"]
    assert len(rounds) == 5 == mujoco_artifact["settings"]["rounds"]
    for r in rounds:
        expected = r["env_control_steps_per_s"] / (r["physics_steps_per_s"] / result["decimation"])
        assert r["efficiency"] == pytest.approx(expected)
    assert result["efficiency"] == pytest.approx(statistics.median(r["efficiency"] for r in rounds))
    assert result["torch"]["intra_op_threads"] == 1 == mujoco_artifact["settings"]["torch_threads"]
    warnings = result["physics_warnings"]  # silent MuJoCo auto-resets are counted, not hidden
    assert warnings["auto_resets"] >= 0 and "badqacc" in warnings["counts"]
    diagnostics = result["backend_diagnostics"]
    assert diagnostics["available"] is True and diagnostics["backend_type"] == "mujoco"


def test_worker_runs_in_its_own_process(mujoco_artifact: dict[str, Any]) -> None:
    result = mujoco_artifact["backends"]["mujoco"]["processes"][0]
    assert result["pid"] == result["launcher_observed_pid"]
    assert result["pid"] != mujoco_artifact["probe_pid"] != os.getpid()
    assert result["pid"] != os.getpid()
    assert result["parent_pid"] == mujoco_artifact["probe_pid"]


def _settings(tmp_path: Path, **over: Any) -> Any:
    args: dict[str, Any] = {
        "backends": "mujoco",
        "task": TASK,
        "num_envs": 16,
        "warmup": 1,
        "iters": 2,
        "seed": 0,
        "mjwarp_device": None,
        "physics_threads": None,
        "acceptance": False,
        "idle_memory_threshold_mib": 1024,
        "idle_wait_s": 0.0,
        "worker_timeout_s": 60.0,
        "output": str(tmp_path / "out.json"),
    }
    args.update(over)
    return validate_settings(**args)


NO_GPU = {
    "available": False,
    "reason": "NVML initialisation failed: no driver",
    "driver": None,
    "devices": [],
}


def _facts(cuda: bool) -> PlatformFacts:
    return PlatformFacts(
        system="Linux", cuda_available=cuda, cuda_device_count=int(cuda), hip_build=False, mps_available=False
    )


def test_acceptance_refused_without_gpu_evidence(tmp_path: Path) -> None:
    settings = _settings(tmp_path, acceptance=True)
    with pytest.raises(ProbeInputError, match=r"NVML evidence of an idle GPU.*no driver"):
        check_preconditions(settings, {}, lambda: NO_GPU, lambda: _facts(False))


def test_acceptance_refuses_profiler_environment(tmp_path: Path) -> None:
    settings = _settings(tmp_path, acceptance=True)
    with pytest.raises(ProbeInputError, match="NSYS_PROFILING_SESSION_ID"):
        check_preconditions(
            settings, {"NSYS_PROFILING_SESSION_ID": "1"}, lambda: NO_GPU, lambda: _facts(True)
        )


def test_acceptance_refuses_the_cpu_diagnostic_lane(tmp_path: Path) -> None:
    settings = _settings(tmp_path, acceptance=True, backends="mjwarp", mjwarp_device="cpu")
    with pytest.raises(ProbeInputError, match="diagnostic lane"):
        check_preconditions(settings, {}, lambda: NO_GPU, lambda: _facts(True))


def test_mjwarp_without_cuda_needs_the_explicit_cpu_flag(tmp_path: Path) -> None:
    settings = _settings(tmp_path, backends="mjwarp,mujoco")
    with pytest.raises(ProbeInputError, match="--mjwarp-device cpu"):
        check_preconditions(settings, {}, lambda: NO_GPU, lambda: _facts(False))
    explicit = _settings(tmp_path, backends="mjwarp,mujoco", mjwarp_device="cpu")
    check_preconditions(explicit, {}, lambda: NO_GPU, lambda: _facts(False))  # accepted


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"output": "relative.json"}, "absolute"),
        ({"output": "/nonexistent-probe-dir/x.json"}, "does not exist"),
        ({"output": "/tmp"}, r"\.json"),
        ({"backends": "mujoco,bullet"}, "unknown"),
        ({"backends": "mujoco,mujoco"}, "twice"),
        ({"backends": ""}, "empty"),
        ({"num_envs": 0}, "num-envs"),
        ({"iters": 0}, "iters"),
        ({"warmup": -1}, "warmup"),
        ({"rounds": 0}, "rounds"),
        ({"processes": 0}, "processes"),
        ({"test_step_sleep_ms": -1.0}, "test-step-sleep-ms"),
        ({"torch_threads": 0}, "torch-threads"),
        ({"task": "nope"}, "task"),
        ({"mjwarp_device": "tpu"}, "mjwarp-device"),
        ({"mjwarp_device": "cpu"}, "only meaningful"),
    ],
)
def test_bad_arguments_are_named(tmp_path: Path, override: dict[str, Any], message: str) -> None:
    with pytest.raises(ProbeInputError, match=message):
        _settings(tmp_path, **override)


def test_cli_bad_output_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    done = _probe("--backends", "mujoco", "--num-envs", "4", "--output", "rel/out.json")
    assert done.returncode == 2
    assert "--output must be an absolute path" in done.stderr
    missing = tmp_path / "missing" / "out.json"
    done = _probe("--backends", "mujoco", "--num-envs", "4", "--output", str(missing))
    assert done.returncode == 2 and not missing.parent.exists()


@pytest.mark.skipif(gpu_snapshot()["available"], reason="this host has NVML GPU evidence")
def test_cli_acceptance_without_gpu_exits_2_with_reason(tmp_path: Path) -> None:
    out = tmp_path / "acc.json"
    done = _probe("--backends", "mujoco", "--num-envs", "4", "--acceptance", "--output", str(out))
    assert done.returncode == 2
    assert "--acceptance needs NVML evidence" in done.stderr
    assert not out.exists()


def test_cli_mjwarp_without_flag_on_cpu_host_exits_2(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA host: mjwarp runs on the production lane")
    out = tmp_path / "w.json"
    done = _probe("--backends", "mjwarp", "--num-envs", "4", "--output", str(out))
    assert done.returncode == 2 and "--mjwarp-device cpu" in done.stderr
    assert not out.exists()


def test_acceptance_stops_on_a_busy_gpu_and_records_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import soakbench.harness.probe.run as probe_module

    nvml = fake.FakeNvml(
        [fake.FakeDevice("GPU-x", "H200", used=100 << 20, total=1 << 37, compute=[(4242, 1 << 30)])]
    )
    started: list[str] = []

    def record(settings: Any, backend: str, workdir: Path) -> dict[str, Any]:
        started.append(backend)
        return {}

    monkeypatch.setattr(probe_module, "run_worker_process", record)
    settings = _settings(tmp_path, acceptance=True)
    artifact, code = probe_module.run_probe(settings, ["probe"], nvml=nvml)
    assert code == 1 and started == []  # nothing measured on a busy GPU
    acc = artifact["acceptance"]
    assert acc["passed"] is False and acc["checks"][0]["when"] == "before"
    assert acc["checks"][0]["devices"][0]["compute_pids"] == [4242]
    validate_artifact(artifact)


def test_acceptance_checks_after_each_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mujoco_artifact: dict[str, Any]
) -> None:
    import soakbench.harness.probe.run as probe_module

    device = fake.FakeDevice("GPU-x", "H200", used=100 << 20, total=1 << 37)
    nvml = fake.FakeNvml([device])

    def leaves_a_process(settings: Any, backend: str, workdir: Path) -> dict[str, Any]:
        device.compute.append((777, 1 << 20))  # something still holds the GPU after the worker exits
        block: dict[str, Any] = json.loads(json.dumps(mujoco_artifact["backends"]["mujoco"]["processes"][0]))
        return block

    monkeypatch.setattr(probe_module, "run_worker_process", leaves_a_process)
    artifact, code = probe_module.run_probe(_settings(tmp_path, acceptance=True), ["probe"], nvml=nvml)
    assert code == 1
    checks = artifact["acceptance"]["checks"]
    assert [(c["when"], c["idle"]) for c in checks] == [("before", True), ("after", False)]
    assert "777" in checks[1]["reasons"][0]
    validate_artifact(artifact)


def test_cli_schema_violation_exits_1_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mujoco_artifact: dict[str, Any]
) -> None:
    from typer.testing import CliRunner

    import soakbench.harness.probe.cli as probe_module

    broken = json.loads(json.dumps(mujoco_artifact))
    del broken["backends"]["mujoco"]["processes"][0]["phases"]  # what a worker bug would produce
    monkeypatch.setattr(probe_module, "check_preconditions", lambda *args: None)
    monkeypatch.setattr(probe_module, "run_probe", lambda settings, argv: (broken, 0))
    out = tmp_path / "out.json"
    done = CliRunner().invoke(probe_module.app, ["--backends", "mujoco", "--output", str(out)])
    assert done.exit_code == 1 and not out.exists()
    assert isinstance(done.exception, SystemExit) and "artifact not written" in done.output  # no traceback
    assert not list(tmp_path.iterdir())  # no temp file left behind either


def test_processes_raw_samples_cpu_and_contention(mujoco_artifact: dict[str, Any]) -> None:
    from soakbench.harness.probe.samples import backend_summary, raw_disagreements, stability

    entry = mujoco_artifact["backends"]["mujoco"]
    processes = entry["processes"]
    assert len(processes) == 2 == mujoco_artifact["settings"]["processes"]
    assert len({p["pid"] for p in processes}) == 2  # a fresh interpreter each
    assert entry["summary"] == backend_summary(processes) and entry["stability"] == stability(processes)
    assert raw_disagreements(mujoco_artifact) == []
    for process in processes:
        assert all(len(r["iteration_ms"]) >= 1 and r["physics_steps"] > 0 for r in process["rounds"])
        assert len(process["phase_samples_ms"]["iteration_ms"]) == 6
        cpu = process["cpu"]
        assert {"physics_exchange", "iteration"} <= set(cpu["phases"])
        assert cpu["phases"]["iteration"]["thread_cpu_ms"] > 0 and cpu["throughput_env_blocks"]["wall_ms"] > 0
    contention = mujoco_artifact["contention"]
    assert contention["probe_cpu_s"] > 0 and len(contention["loadavg_start"]) == 3
    assert contention["gpu"]["available"] is False  # this CPU host; the NVML reason is recorded
    assert mujoco_artifact["settings"]["test_step_sleep_ms"] == 0.0


def test_the_gpu_health_at_start_is_read_before_anything_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import soakbench.harness.probe.run as probe_module

    device = fake.FakeDevice("GPU-x", "H200", used=0, total=1 << 37, temperature=45)

    def heat_and_stop(*_args: Any) -> bool:
        device.temperature = 90  # minutes of load, in one step
        return False

    monkeypatch.setattr(probe_module, "_measure_all", heat_and_stop)
    artifact, _code = probe_module.run_probe(_settings(tmp_path), ["probe"], nvml=fake.FakeNvml([device]))
    (at_start,) = artifact["context"]["gpu"]["health_at_start"]["devices"]
    assert at_start["temperature_c"] == 45
