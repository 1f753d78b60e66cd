"""`cumps` lifecycle against a fake MPS control binary and a fake NVML (test doubles under tests/)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foundation import mps
from foundation.mps_cleanup import clear_dead_control
from harness import cumps, cumps_doctor
from tests.harness.fake_nvml import FakeDevice, FakeNvml

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"
UUID_A = "GPU-1a2b3c4d-0000-1111-2222-333344445555"
UUID_B = "GPU-9f8e7d6c-0000-1111-2222-333344445555"
runner = CliRunner()


def _gpu(uuid: str) -> FakeDevice:
    return FakeDevice(uuid=uuid, name="NVIDIA H200", used=0, total=141 << 30)


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A host with the fake control binary on PATH, a private cache and MPS root, and one GPU that
    torch sees too. Everything lives under one short directory: a control socket path must fit in
    107 bytes, which pytest's tmp_path does not promise."""
    root = Path(tempfile.mkdtemp(prefix="cumps-", dir="/tmp"))
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "cache"))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("FAKE_MPS_CONTROL_KIND", raising=False)
    monkeypatch.setattr(mps, "DEFAULT_ROOT", root / "cumps")
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", lambda: [UUID_A])
    set_gpus(monkeypatch, [_gpu(UUID_A)])
    yield root
    for path in (root / "cache").rglob("*.json"):
        try:
            pid = json.loads(path.read_text()).get("control_pid")
            if pid and mps.start_ticks(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        except (ValueError, ProcessLookupError, AttributeError):
            pass
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["socket", "fifo"])
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake daemon's control endpoint: a Unix socket (current drivers) or a FIFO (older ones)."""
    monkeypatch.setenv("FAKE_MPS_CONTROL_KIND", request.param)
    return str(request.param)


def set_gpus(monkeypatch: pytest.MonkeyPatch, devices: list[FakeDevice]) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNvml(devices))


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(cumps.app, list(args))
    return result.exit_code, result.output


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while mps.start_ticks(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return mps.start_ticks(pid) is None


def test_start_env_status_stop_with_defaults(host: Path, kind: str) -> None:
    code, output = invoke("start")
    assert code == 0, output
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    record = json.loads((host / "cache/soakbench/cumps" / f"{name}.json").read_text())
    assert record["name"] == name and record["gpu_uuid"] == UUID_A and record["uid"] == os.getuid()
    assert record["control_start_ticks"] == mps.start_ticks(record["control_pid"])
    assert record["control_pipe_kind"] == kind and f"control {kind}" in output
    pipe, log = host / "cumps" / name / "pipe", host / "cumps" / name / "log"
    assert mps.pipe_kind(pipe) == kind
    for directory in (host / "cumps", host / "cumps" / name, pipe, log):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert "started gpu=" + UUID_A in (log / "control.log").read_text()

    code, output = invoke("env")
    assert code == 0
    assert f"export CUDA_MPS_PIPE_DIRECTORY={pipe}" in output
    assert f"export CUDA_VISIBLE_DEVICES={UUID_A}" in output
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ, "env must not change its own process environment"

    code, output = invoke("status")
    assert code == 0 and f"daemon {name}: live pid {record['control_pid']}" in output
    assert f"control {kind}" in output

    code, output = invoke("stop")
    assert code == 0, output
    assert _wait_gone(record["control_pid"])
    assert (log / "control.log").exists(), "logs are kept after stop"
    assert "command quit" in (log / "control.log").read_text()
    assert not list((host / "cache/soakbench/cumps").glob("*.json"))


def test_several_gpus_need_a_selector(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_gpus(monkeypatch, [_gpu(UUID_A), _gpu(UUID_B)])
    code, output = invoke("start")
    assert code == 2 and "pass --gpus" in output
    code, output = invoke("doctor")
    assert code == 1 and "one GPU selected" in output and "fix: `uv run cumps doctor --gpus 0`" in output
    code, output = invoke("start", "--gpus", "1", "--name", "second")
    assert code == 0, output
    record = json.loads((host / "cache/soakbench/cumps/second.json").read_text())
    assert record["gpu_uuid"] == UUID_B
    code, output = invoke("env", "--name", "second")
    assert f"CUDA_VISIBLE_DEVICES={UUID_B}" in output
    assert invoke("stop", "--name", "second")[0] == 0
    assert _wait_gone(record["control_pid"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "MIG-4f1e2d3c-aaaa-bbbb-cccc-000011112222"], "MIG instance"),
        (["--gpus", "0,1"], "multi-GPU gate"),
        (["--gpus", "all"], "read-only diagnostics"),
        (["--gpus", "7"], "matches no visible GPU"),
        (["--topology", "task_per_gpu"], "parsed but not supported"),
        (["--topology", "single_task_multi_gpu"], "parsed but not supported"),
        (["--topology", "ring"], "unknown"),
        (["--name", "../evil"], "is not allowed"),
        (["--pipe-dir", "relative/pipe"], "must be an absolute path"),
        (["--log-dir", "/tmp/a/../b"], "must not contain '..'"),
    ],
)
def test_start_refusals(host: Path, args: list[str], message: str) -> None:
    code, output = invoke("start", *args)
    assert code == 2 and message in output
    assert not (host / "cache/soakbench/cumps").exists() or not list(
        (host / "cache/soakbench/cumps").glob("*.json")
    )


def test_status_accepts_all(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_gpus(monkeypatch, [_gpu(UUID_A), _gpu(UUID_B)])
    code, output = invoke("status", "--gpus", "all")
    assert code == 0 and UUID_A in output and UUID_B in output


def test_wrong_directory_mode_is_refused(host: Path) -> None:
    pipe = host / "custom" / "pipe"
    pipe.mkdir(parents=True, mode=0o755)
    os.chmod(pipe, 0o755)
    code, output = invoke("start", "--pipe-dir", str(pipe), "--log-dir", str(host / "custom" / "log"))
    assert code == 2 and "expected 0o700" in output


def _stale_record(name: str, host_name: str | None = None) -> mps.DaemonRecord:
    """A record whose control process has exited."""
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    record = mps.DaemonRecord(
        name=name,
        uid=os.getuid(),
        host=host_name or socket.gethostname(),
        control_pid=dead.pid,
        control_start_ticks=1,
        gpu_uuid=UUID_A,
        pipe_dir="/nonexistent/pipe",
        log_dir="/nonexistent/log",
        started_unix=0.0,
    )
    mps.write_record(record)
    return record


def test_stale_record_is_quarantined_not_deleted(host: Path) -> None:
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    stale = _stale_record(name)
    _stale_record("older")
    _stale_record("elsewhere", host_name="another-host")
    code, output = invoke("status")
    assert "daemon older: STALE" in output and "daemon elsewhere: STALE" in output
    assert "left to its host" in output
    code, output = invoke("start")
    assert code == 0, output
    assert output.count("quarantined stale record") == 2
    quarantine = host / "cache/soakbench/cumps/quarantine"
    kept = list(quarantine.glob(f"{name}.*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["control_pid"] == stale.control_pid
    assert "is gone" in kept[0].with_suffix(".reason.txt").read_text()
    assert len(list(quarantine.glob("older.*.json"))) == 1
    assert (host / "cache/soakbench/cumps/elsewhere.json").exists(), "another host's record was touched"
    assert invoke("stop")[0] == 0


def test_every_failing_doctor_check_names_its_fix(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    monkeypatch.setenv("PATH", "/nonexistent")
    set_gpus(monkeypatch, [_gpu(UUID_A), _gpu(UUID_B)])
    _stale_record("older")
    failing = [f for f in cumps_doctor.doctor_findings(None) if not f.ok]
    assert [f.check for f in failing] == [
        "Linux host",
        "one GPU selected",
        f"{mps.CONTROL_BINARY} on PATH",
        "no stale ownership records",
        "a live cumps daemon",
    ]
    for finding in failing:
        assert re.search(r"`[^`]+`", finding.fix), f"{finding.check}: no command in {finding.fix!r}"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    hidden = next(f for f in cumps_doctor.doctor_findings(None) if not f.ok and "NVML" in f.check)
    assert "hides them all" in hidden.detail and "`unset CUDA_VISIBLE_DEVICES`" in hidden.fix


def test_unreadable_record_is_reported_not_a_traceback(host: Path) -> None:
    records = host / "cache/soakbench/cumps"
    records.mkdir(parents=True)
    (records / "broken.json").write_text("{not json")
    code, output = invoke("status")
    assert code == 2 and "unreadable ownership record" in output
    code, output = invoke("doctor")
    assert code == 1 and "first unmet prerequisite: ownership records readable -> fix: `mv " in output
    code, output = invoke("stop")
    assert code == 2 and "broken.json" in output


def test_stop_never_quits_an_unmanaged_daemon(host: Path, kind: str) -> None:
    pipe = host / "unmanaged" / "pipe"
    pipe.mkdir(parents=True)
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(pipe)}
    subprocess.run([str(FAKE_BIN / "nvidia-cuda-mps-control"), "-d"], env=env, check=True)
    pid = mps.find_control_pid(pipe)
    assert pid is not None
    try:
        code, output = invoke("stop")
        assert code == 2 and "no live cumps-recorded daemon" in output
        # A record whose PID now belongs to another process (start ticks differ) is not evidence either.
        forged = mps.DaemonRecord(
            name="forged",
            uid=os.getuid(),
            host=os.uname().nodename,
            control_pid=pid,
            control_start_ticks=(mps.start_ticks(pid) or 0) + 1,
            gpu_uuid=UUID_A,
            pipe_dir=str(pipe),
            log_dir=str(pipe),
            started_unix=0.0,
        )
        mps.write_record(forged)
        code, output = invoke("stop", "--name", "forged")
        assert code == 2 and "stale" in output
        assert mps.pipe_kind(pipe) == kind and mps.start_ticks(pid) is not None, (
            "unmanaged daemon was touched"
        )
    finally:
        os.kill(pid, signal.SIGKILL)


def test_training_validation_resolves_or_fails_closed(host: Path, kind: str) -> None:
    with pytest.raises(mps.CumpsError, match="run `cumps start` first"):
        mps.resolve_for_training(UUID_A, {})
    assert invoke("start")[0] == 0
    resolved = mps.resolve_for_training(UUID_A, {})
    assert resolved["source"] == "record" and resolved["gpu_uuid"] == UUID_A
    assert resolved["control_pipe_kind"] == kind
    with pytest.raises(mps.CumpsError, match="none is recorded"):
        mps.resolve_for_training(UUID_B, {})
    explicit = mps.resolve_for_training(UUID_A, {"CUDA_MPS_PIPE_DIRECTORY": resolved["pipe_dir"]})
    assert explicit["source"] == "environment" and explicit["control_pid"] == resolved["control_pid"]
    assert explicit["control_pipe_kind"] == kind
    with pytest.raises(mps.CumpsError, match="has no control pipe"):
        mps.resolve_for_training(UUID_A, {"CUDA_MPS_PIPE_DIRECTORY": str(host / "nowhere")})
    ambient = mps.ambient_facts({"CUDA_MPS_PIPE_DIRECTORY": resolved["pipe_dir"]})
    assert (
        ambient["control_pipe_kind"] == kind and ambient["server_pid"] == 424242 and ambient["ambient_server"]
    )
    assert invoke("stop")[0] == 0


def test_ambient_facts_without_a_daemon(host: Path) -> None:
    facts = mps.ambient_facts({"CUDA_MPS_PIPE_DIRECTORY": str(host / "none")})
    assert facts == {
        "raw_cuda_mps_pipe_directory": str(host / "none"),
        "effective_pipe_dir": str(host / "none"),
        "control_pipe_kind": "missing",
        "server_pid": None,
        "ambient_server": False,
    }


def test_no_gpu_host(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = FakeNvml([], fail={"nvmlInit": RuntimeError("NVML Shared Library Not Found")})
    monkeypatch.setitem(__import__("sys").modules, "pynvml", broken)
    code, output = invoke("status")
    assert code == 1 and "GPU: none visible" in output and "Shared Library Not Found" in output
    code, output = invoke("doctor")
    assert code == 1 and "first unmet prerequisite: NVIDIA GPU visible through NVML" in output
    assert "fix: `nvidia-smi` must list the GPU" in output
    code, output = invoke("start")
    assert code == 2 and "no GPU evidence" in output


def _record_of(host: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((host / "cache/soakbench/cumps" / f"{name}.json").read_text())
    return data


def test_socket_path_limit_is_107_bytes(tmp_path: Path) -> None:
    # "/control" is 8 bytes: a 99-byte pipe directory gives exactly the 107 bytes sun_path allows.
    fits = Path("/" + "p" * 98)
    assert mps.check_control_path(fits, "--pipe-dir", "hint") == fits
    with pytest.raises(mps.CumpsError, match=r"is 108 bytes, over the 107-byte limit.*; hint"):
        mps.check_control_path(Path("/" + "p" * 99), "--pipe-dir", "hint")
    with pytest.raises(mps.CumpsError, match="is 108 bytes"):  # bytes, not characters
        mps.check_control_path(Path("/" + "é" + "p" * 97), "--pipe-dir", "hint")
    # The limit is the kernel's: a socket at a 107-byte path binds.
    short = Path(tempfile.mkdtemp(prefix="sun-", dir="/tmp"))
    try:
        path = short / ("s" * (mps.SOCKET_PATH_LIMIT - len(os.fsencode(str(short))) - 1))
        assert len(os.fsencode(str(path))) == mps.SOCKET_PATH_LIMIT
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
            bound.bind(str(path))
    finally:
        shutil.rmtree(short)


def test_too_long_pipe_dir_is_refused_before_anything_changes(host: Path) -> None:
    long_pipe = host / ("p" * (110 - len(str(host))))
    code, output = invoke("start", "--pipe-dir", str(long_pipe))
    assert code == 2 and "--pipe-dir" in output and "107-byte limit" in output, output
    assert f"{long_pipe}/control is {len(str(long_pipe)) + 8} bytes" in output
    long_name = "n" * 100  # the default /…/cumps/<name>/pipe/control is then over the limit
    code, output = invoke("start", "--name", long_name)
    assert code == 2 and "the default pipe directory" in output and "107-byte limit" in output
    assert "pass a shorter --name" in output
    assert not long_pipe.exists() and not (host / "cumps").exists()
    assert not (host / "cache/soakbench/cumps").exists()


def test_quarantine_clears_a_dead_daemons_control_files_only(
    host: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    set_gpus(monkeypatch, [_gpu(UUID_A), _gpu(UUID_B)])
    assert invoke("start", "--gpus", "0", "--name", "dead")[0] == 0
    assert invoke("start", "--gpus", "1", "--name", "alive")[0] == 0
    dead, alive = _record_of(host, "dead"), _record_of(host, "alive")
    os.kill(dead["control_pid"], signal.SIGKILL)  # a crash: no quit, files stay behind
    assert _wait_gone(dead["control_pid"])
    dead_pipe, alive_pipe = Path(dead["pipe_dir"]), Path(alive["pipe_dir"])
    outside = host / "outside"
    outside.write_text("not the daemon's")
    (dead_pipe / "control_link").symlink_to(outside)
    assert mps.pipe_kind(dead_pipe) == kind and (dead_pipe / "control_lock").exists()
    # A stale record naming the live daemon's pipe directory must not cost that daemon its socket.
    mps.write_record(replace(mps.DaemonRecord(**dead), name="forged", pipe_dir=str(alive_pipe)))

    code, output = invoke("start", "--gpus", "0", "--name", "dead")
    assert code == 0, output
    assert f"removed leftover {dead_pipe / 'control'} of the dead daemon dead" in output
    assert f"removed leftover {dead_pipe / 'control_lock'} of the dead daemon dead" in output
    assert f"left {dead_pipe / 'control_link'} (not a socket, FIFO or regular file) in place" in output
    assert f"left {alive_pipe} untouched: a live recorded daemon serves {alive_pipe}" in output
    assert output.count("quarantined stale record") == 2
    assert outside.read_text() == "not the daemon's" and (dead_pipe / "control_link").is_symlink()
    assert mps.pipe_kind(alive_pipe) == kind and (alive_pipe / "control_lock").exists()
    reasons = list((host / "cache/soakbench/cumps/quarantine").glob("dead.*.reason.txt"))
    assert len(reasons) == 1 and f"removed leftover {dead_pipe / 'control'}" in reasons[0].read_text()
    assert _record_of(host, "dead")["control_pipe_kind"] == kind, "the restarted daemon serves again"
    assert invoke("stop", "--name", "alive")[0] == 0 and invoke("stop", "--name", "dead")[0] == 0


def test_clear_dead_control_refuses_what_it_cannot_prove(host: Path) -> None:
    pipe = host / "p"
    pipe.mkdir()
    (pipe / "control").write_text("")
    other_host = _stale_record("theirs", host_name="another-host")
    theirs = replace(other_host, pipe_dir=str(pipe))
    assert clear_dead_control(theirs, []).skipped == "the record was written by another uid or host"
    me = os.getpid()
    ticks = mps.start_ticks(me)
    alive = replace(theirs, host=socket.gethostname(), control_pid=me, control_start_ticks=ticks or 0)
    assert clear_dead_control(alive, []).skipped == "its control process is alive"
    linked = host / "linked"
    linked.symlink_to(pipe)
    dead = _stale_record("dead-linked")
    via_link = replace(dead, pipe_dir=str(linked))
    skipped = clear_dead_control(via_link, []).skipped
    assert skipped is not None and "without following links" in skipped
    assert (pipe / "control").exists()
    assert clear_dead_control(replace(dead, pipe_dir=str(pipe)), []).removed == (pipe / "control",)


def test_old_records_without_the_control_kind_still_load(host: Path) -> None:
    record = _stale_record("old")
    path = host / "cache/soakbench/cumps/old.json"
    data = json.loads(path.read_text())
    del data["control_pipe_kind"]
    path.write_text(json.dumps(data))
    (_, loaded), *_ = mps.load_records()
    assert loaded == record and loaded.control_pipe_kind is None


def test_doctor_asks_the_live_daemon(host: Path, kind: str) -> None:
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    code, output = invoke("doctor")
    assert code == 0, output
    assert f"ok   daemon {name} answers get_server_list: answered over its control {kind}: " in output
    assert "MPS server PIDs 424242" in output
    assert (
        f"ok   learner's CUDA device is the selected GPU: torch's cuda:0 and NVML agree on {UUID_A}" in output
    )
    assert "command get_server_list" in (host / "cumps" / name / "log" / "control.log").read_text()
    assert invoke("stop")[0] == 0


def test_doctor_reports_a_daemon_that_does_not_answer(host: Path) -> None:
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    record = mps.load_records()[0][1]
    control = Path(record.pipe_dir) / "control"
    control.unlink()  # a socket nobody listens on stands where the daemon's was
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as deaf:
        deaf.bind(str(control))
    refused = next(f for f in cumps_doctor.doctor_findings(None) if not f.ok)
    assert refused.check == f"daemon {name} answers get_server_list"
    assert "failed (exit 1)" in refused.detail and "cannot connect" in refused.detail
    assert f"`kill {record.control_pid}`" in refused.fix
    assert f"--name {name} --pipe-dir {record.pipe_dir} --log-dir {record.log_dir}" in refused.fix
    control.unlink()
    code, output = invoke("doctor")
    assert code == 1 and f"{control} is missing, not a socket or a FIFO" in output
    assert f"first unmet prerequisite: daemon {name} answers get_server_list -> fix: read " in output
    os.kill(record.control_pid, signal.SIGKILL)


def _no_cuda() -> list[str]:
    raise cumps_doctor.NoCudaDevice("torch 2.x (CUDA build None) sees no CUDA device")


@pytest.mark.parametrize(
    ("query", "ok", "detail", "fix"),
    [
        (lambda: [UUID_A], True, f"torch's cuda:0 and NVML agree on {UUID_A}", ""),
        (
            lambda: [UUID_B],
            False,
            f"torch's cuda:0 is {UUID_B} but NVML names the selected GPU {UUID_A}",
            f"`export CUDA_VISIBLE_DEVICES={UUID_A}`",
        ),
        (lambda: [UUID_A, UUID_B], False, "torch sees 2 CUDA devices", f"CUDA_VISIBLE_DEVICES={UUID_A}"),
        (_no_cuda, False, "cannot be checked: torch 2.x (CUDA build None) sees no CUDA device", "CUDA build"),
    ],
    ids=["match", "mismatch", "several", "no-cuda"],
)
def test_learner_device_uuid_is_compared_with_nvml(query: object, ok: bool, detail: str, fix: str) -> None:
    assert callable(query)
    found = cumps_doctor.learner_device_finding([mps.Gpu(0, UUID_A, "NVIDIA H200")], query)
    assert found.ok is ok and detail in found.detail and fix in found.fix
    assert ok or re.search(r"`[^`]+`", found.fix), "a failing finding names a command"


def test_doctor_fails_closed_when_torch_cannot_tell(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert invoke("start")[0] == 0
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", _no_cuda)
    code, output = invoke("doctor")
    assert code == 1 and "FAIL learner's CUDA device is the selected GPU: cannot be checked" in output
    monkeypatch.setattr(cumps_doctor, "torch_cuda_uuids", lambda: [UUID_B.lower()])
    code, output = invoke("doctor")
    assert code == 1 and f"but NVML names the selected GPU {UUID_A}" in output
    assert invoke("stop")[0] == 0


def test_torch_query_without_cuda_says_why() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA; the cuda-marked tests cover the real UUID")
    with pytest.raises(cumps_doctor.NoCudaDevice, match="sees no CUDA device"):
        cumps_doctor.torch_cuda_uuids()


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(cumps.app, list(args))
    document = json.loads(result.stdout)  # the whole of stdout is one document, no markup
    assert isinstance(document, dict) and document["schema_version"] == 1
    return result.exit_code, document


def test_json_of_status_doctor_and_env(host: Path) -> None:
    _stale_record("older")
    assert invoke("start")[0] == 0
    name = "gpu-1a2b3c4d-0000-1111-2222-333344445555"
    code, status = invoke_json("status", "--json")
    assert code == 0 and set(status) == {"schema_version", "gpu", "daemons", "cuda_mps_pipe_directory"}
    assert status["gpu"] == {
        "available": True,
        "reason": None,
        "devices": [{"index": 0, "uuid": UUID_A, "name": "NVIDIA H200"}],
    }
    assert status["cuda_mps_pipe_directory"] is None
    daemons = status["daemons"]
    assert isinstance(daemons, list) and [d["state"] for d in daemons] == ["live"]
    live = daemons[0]
    assert live["name"] == name and live["control_pipe_kind"] == "socket" and live["stale_reason"] is None
    assert set(live) == {
        "name",
        "state",
        "stale_reason",
        "quarantined_by_next_start",
        "control_pid",
        "gpu_uuid",
        "pipe_dir",
        "log_dir",
        "control_pipe_kind",
    }

    code, doctor = invoke_json("doctor", "--json")
    assert code == 0 and doctor["ok"] is True and doctor["first_unmet"] is None
    findings = doctor["findings"]
    assert isinstance(findings, list) and all(set(f) == {"check", "ok", "detail", "fix"} for f in findings)
    assert f"daemon {name} answers get_server_list" in [f["check"] for f in findings]

    code, env = invoke_json("env", "--json")
    assert code == 0 and env["name"] == name
    assert env["exports"] == {
        "CUDA_MPS_PIPE_DIRECTORY": str(host / "cumps" / name / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(host / "cumps" / name / "log"),
        "CUDA_VISIBLE_DEVICES": UUID_A,
    }
    assert invoke("stop")[0] == 0


def test_json_keeps_the_exit_codes(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stale_record("older", host_name="another-host")
    code, status = invoke_json("status", "--json")
    assert code == 0 and [(d["name"], d["state"]) for d in status["daemons"]] == [("older", "stale")]
    assert status["daemons"][0]["quarantined_by_next_start"] is False
    code, doctor = invoke_json("doctor", "--json")
    assert code == 1 and doctor["ok"] is False
    assert doctor["first_unmet"] == {
        "check": "a live cumps daemon for the selected GPU",
        "fix": "`uv run cumps start`",
    }
    result = runner.invoke(cumps.app, ["env", "--json"])
    assert result.exit_code == 2 and result.stdout == "" and "no live cumps-recorded daemon" in result.stderr
    broken = FakeNvml([], fail={"nvmlInit": RuntimeError("NVML Shared Library Not Found")})
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    code, status = invoke_json("status", "--json")
    assert code == 1 and status["gpu"]["available"] is False
    assert "Shared Library Not Found" in str(status["gpu"]["reason"])
