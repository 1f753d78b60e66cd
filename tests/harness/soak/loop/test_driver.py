"""Monitor settings, `soak run` input rejection (before anything is spawned), and torch isolation."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.cli import main
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError, validate_settings
from soakbench.harness.soak.route import (
    OWNED_KEYS,
    TrainRoute,
    check_extra_overrides,
    check_train_config,
    train_command,
)
from tests.harness.soak._soakrun import FAULTS, REPO


def _settings(tmp: Path, **changes: Any) -> MonitorSettings:
    base = MonitorSettings(
        command=("true",), mode="monitor", log_dir=tmp / "run", output=tmp / "soak.json", min_duration_s=0,
        sample_interval_s=1, startup_timeout_s=10, stale_progress_s=10, post_shutdown_grace_s=0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_validate_settings(tmp_path: Path) -> None:
    validate_settings(_settings(tmp_path))
    cases: dict[str, dict[str, Any]] = {
        "--log-dir: must be an absolute": dict(log_dir=Path("rel/run")),
        "--output: must be an absolute": dict(output=Path("soak.json")),
        "--output: must end in .json": dict(output=tmp_path / "soak.txt"),
        "--sample-interval-seconds": dict(sample_interval_s=0),
        "--post-shutdown-grace-seconds": dict(post_shutdown_grace_s=-1),
        "command: empty": dict(command=()),
        "must not be inside --log-dir": dict(output=tmp_path / "run" / "soak.json"),
    }
    for message, change in cases.items():
        with pytest.raises(SettingsError, match=message):
            validate_settings(_settings(tmp_path, **change))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "old.txt").write_text("x")
    with pytest.raises(SettingsError, match="not empty"):
        validate_settings(_settings(tmp_path))
    (tmp_path / "soak.json").write_text("{}")
    with pytest.raises(SettingsError, match="already exists"):
        validate_settings(_settings(tmp_path, log_dir=tmp_path / "new"))


@pytest.mark.parametrize("key", sorted(OWNED_KEYS))
def test_owned_overrides_are_rejected(key: str) -> None:
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        check_extra_overrides([f"{key}=1"])
    with pytest.raises(SettingsError, match="owned"):
        check_extra_overrides([f"+{key}=1"])


def test_free_overrides_pass_and_malformed_fail() -> None:
    check_extra_overrides(["algo.save_interval=100", "training.heartbeat_seconds=2"])
    with pytest.raises(SettingsError, match=r"dotted\.key=value"):
        check_extra_overrides(["algo.save_interval"])


def test_train_command_is_owner_routed(tmp_path: Path) -> None:
    cmd = train_command(
        TrainRoute("sac", "g1_walk_flat", "mujoco", 16, 50, tmp_path, ("algo.save_interval=10",))
    )
    assert cmd[1:3] == ["-m", "soakbench.runtime.cli"]
    assert cmd[3:9] == ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco"]
    assert "training.no_play=true" in cmd and cmd[-1] == "algo.save_interval=10"
    assert f"log_dir={json.dumps(str(tmp_path))}" in cmd


@pytest.mark.parametrize("name", ["a: b", "run #1", "[x]", 'quote"d', "ünï"])
def test_awkward_log_dirs_reach_the_trainer_unchanged(tmp_path: Path, name: str) -> None:
    """The log dir travels as a quoted YAML string: what `train` composes is the folder the monitor watches."""
    from soakbench.runtime.config import compose

    log_dir = tmp_path / name / "run"
    route = TrainRoute("sac", "g1_walk_flat", "mujoco", 16, 50, log_dir)
    check_train_config(route)  # raises on a mismatch
    cmd = train_command(route)
    assert compose("sac", "g1_walk_flat", "mujoco", cmd[9:]).log_dir == str(log_dir)


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--extra-override", "algo.num_envs=8"], "owned"),
        (["--extra-override", "training.no_play=false"], "play mode"),
        (["--extra-override", "log_dir=/tmp/x"], "owned"),
        (
            ["--extra-override", "algo.gamma=2"],
            "trainer's configuration is invalid: algo.gamma=2 is out of range",
        ),
        (["--extra-override", "algo.batch_sise=64"], "algo.batch_size"),  # unknown key: closest one named
        (["--extra-override", "algo.critic_hidden_dim=[256,"], "not valid YAML"),
        (
            ["--extra-override", "algo.gamma=[/x]"],
            "algo.gamma must be a number, got ['/x']",
        ),  # not Rich markup
        (["--num-envs", "70000"], "algo.num_envs=70000 is out of range"),
    ],
)
def test_soak_run_rejects_before_spawning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    log_dir, output = tmp_path / "run", tmp_path / "soak.json"
    argv = ["run", "--sim", "mujoco", "--log-dir", str(log_dir), "--output", str(output), *extra]
    code, err = _run_cli(argv, capsys)
    assert code == 2 and message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_soak_run_rejects_relative_and_dirty_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run_cli(
        ["run", "--sim", "mujoco", "--log-dir", "rel", "--output", str(tmp_path / "s.json")], capsys
    )
    assert code == 2 and "absolute" in err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "progress.jsonl").write_text("{}\n")
    argv = [
        "run",
        "--sim",
        "mujoco",
        "--log-dir",
        str(tmp_path / "run"),
        "--output",
        str(tmp_path / "s.json"),
    ]
    code, err = _run_cli(argv, capsys)
    assert code == 2 and "not empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_mjwarp_without_cuda_fails_closed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from soakbench.foundation.nvml import gpu_snapshot

    if gpu_snapshot()["available"]:
        pytest.skip("a GPU is visible here; the no-CUDA refusal cannot be observed")
    argv = ["run", "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "s.json")]
    code, err = _run_cli(argv, capsys)
    assert code == 2 and "--sim mujoco" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.linux_only
@pytest.mark.soak
def test_monitor_never_imports_torch(tmp_path: Path) -> None:
    """Import every harness.soak module and run a whole monitor in-process: torch must stay unloaded."""
    log_dir, output = tmp_path / "run", tmp_path / "soak.json"
    code = f"""
import importlib, pkgutil, sys
import soakbench.harness.soak as soak_package
for mod in pkgutil.walk_packages(soak_package.__path__, "soakbench.harness.soak."):
    importlib.import_module(mod.name)
assert "torch" not in sys.modules, "import"
from pathlib import Path
from soakbench.harness.soak.route import TrainRoute, check_train_config
check_train_config(TrainRoute("flashsac", "g1_motion_tracking", "mjwarp", 8, 5, Path({str(log_dir)!r})))
assert "torch" not in sys.modules, "check_train_config"
from pathlib import Path
from soakbench.harness.soak.loop.settings import MonitorSettings
from soakbench.harness.soak.outcome import run_monitor
rc = run_monitor(MonitorSettings(
    command=(sys.executable, {str(FAULTS / "healthy_sawtooth.py")!r}, {str(log_dir)!r}, "5"), mode="monitor", min_trend_samples=8,
    log_dir=Path({str(log_dir)!r}), output=Path({str(output)!r}), min_duration_s=0, sample_interval_s=0.2,
    startup_timeout_s=5, stale_progress_s=2, post_shutdown_grace_s=0.2, live="off"))
assert "torch" not in sys.modules, "run"
print("RC", rc)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RC 0" in done.stdout
    assert json.loads(output.read_text())["status"] == "passed"


def test_progress_tail_parses_complete_lines_only(tmp_path: Path) -> None:
    from soakbench.harness.soak.host.sampler import ProgressTail

    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    assert tail.poll() is None  # no file yet
    path.write_bytes(b'{"iteration": 1}\n{"iteration": 2')
    assert tail.poll() == {"iteration": 1}
    with open(path, "ab") as fh:
        fh.write(b"}\nnot json\n[1]\n")
    assert tail.poll() == {"iteration": 2}
    assert (tail.records, tail.parse_errors) == (2, 2)


def test_liveness_sees_creation_growth_and_touch(tmp_path: Path) -> None:
    import os

    from soakbench.harness.soak.host.sampler import LivenessState

    live = LivenessState(tmp_path)
    assert live.scan(1.0)["changed"] is False and not live.ever_changed
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("x")
    assert live.scan(2.0)["changed"] is True and live.last_change == 2.0
    assert live.scan(3.0)["changed"] is False and live.last_change_mono(0.0) == 2.0
    os.utime(tmp_path / "sub" / "a.txt", ns=(10**18, 10**18))
    assert live.scan(4.0)["changed"] is True


def test_summarize_eta() -> None:
    from soakbench.harness.soak.evidence.live import summarize

    totals = dict(
        process_count=3, rss_bytes=3 << 20, eventfd=4, shared_memory_fd=20, fd_total=44, gpu_memory_bytes=None
    )
    sample = {"t": 10.0, "totals": totals, "progress": {"iteration": 100, "env_steps_per_s": 1234.5}}
    fields = summarize(sample, phase="running", max_iterations=400, min_duration_s=0, iterations_per_s=10.0)
    assert fields["eta"] == "0:30" and fields["iteration"] == "100/400" and fields["gpu_mib"] == "n/a"
    fields = summarize({**sample, "progress": None}, phase="startup", max_iterations=None, min_duration_s=70)
    assert fields["eta"] == "1:00" and fields["iteration"] == "-"


def test_soak_demo_bad_input_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_cli(["demo", "--reports-dir", str(tmp_path), "--min-duration-seconds", "-1"], capsys)
    assert code == 2 and "--min-duration-seconds: must be >= 0" in err
    assert list(tmp_path.iterdir()) == []  # the timestamped folder was removed again


def test_the_demo_soaks_the_lifecycle_with_one_update_per_iteration(tmp_path: Path) -> None:
    from soakbench.harness.soak.cli import DEMO_ITERATIONS, demo_route
    from soakbench.harness.soak.route import train_overrides
    from soakbench.runtime.config import compose

    route = demo_route(tmp_path / "run", DEMO_ITERATIONS)
    cfg = compose(route.algo, route.task, route.sim, train_overrides(route))
    assert (cfg.algo.num_envs, cfg.algo.max_iterations) == (16, DEMO_ITERATIONS)
    assert cfg.algo.updates_per_iteration == 1
    assert compose("sac", "g1_walk_flat", "mujoco").algo.updates_per_iteration > 1  # the owner's recipe


def test_soak_run_and_demo_build_the_same_owner_routed_settings(tmp_path: Path) -> None:
    from soakbench.harness.soak.command_options import MonitorOptions
    from soakbench.harness.soak.route import run_settings

    route = TrainRoute("sac", "g1_walk_flat", "mujoco", 16, 800, tmp_path / "run", ("a.b=1",))
    options = MonitorOptions(
        log_dir=route.log_dir, output=tmp_path / "soak.json", min_duration_seconds=30, sample_interval_seconds=2,
        startup_timeout_seconds=300, stale_progress_seconds=120, post_shutdown_grace_seconds=5,
    )  # fmt: skip
    settings = run_settings(route, options)
    assert settings.mode == "run" and settings.max_iterations == 800
    assert settings.log_dir == tmp_path / "run"
    assert list(settings.command) == train_command(route)
    assert settings.run_settings == {
        "algo": "sac", "task": "g1_walk_flat", "sim": "mujoco", "num_envs": 16, "iterations": 800,
        "extra_overrides": ["a.b=1"],
    }  # fmt: skip
    assert settings.watch_paths == (tmp_path / "run" / "checkpoints",)  # soak run watches them by itself
    validate_settings(settings)


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody has reaped yet (it runs no more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_an_error_before_the_tree_is_held_still_stops_the_whole_group() -> None:
    """Between the spawn and the supervisor (the exec wrapper's handshake, the first /proc read) an error
    must not leave the command running: the exit callback kills its process group."""
    import time

    from soakbench.harness.soak.loop.driver import _StopOnError

    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    stopper = _StopOnError(proc, grace_s=1.0)
    assert stopper(RuntimeError, RuntimeError("handshake"), None) is False  # the error propagates
    assert proc.returncode is not None
    deadline = time.monotonic() + 5.0
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild), f"pid {grandchild} of the group is still running 5 s after the stop"
    assert stopper(None, None, None) is False  # no error: nothing stopped, nothing swallowed
